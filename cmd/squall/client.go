package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/pflag"
)

// clusterClient is the client side of the commands that talk to the
// masters' own endpoints (status, backup, restore): the masters to ask,
// in order, and the token.
type clusterClient struct {
	masters []string
	token   string
	http    *http.Client
}

// clusterFlags are the flags that build a clusterClient.
type clusterFlags struct {
	masters   []string
	tokenFile string
	caFile    string
}

// define defines the flags; role is the permission the token needs. The
// caller binds them to SQUALL_* variables (bindEnv, documentEnv).
func (cf *clusterFlags) define(f *pflag.FlagSet, role string) {
	f.StringSliceVar(&cf.masters, "master", nil, "base URL of a master, http://host:port (repeatable or comma-separated; required)")
	f.StringVar(&cf.tokenFile, "token-file", "", "file holding the API token, with "+role+" on the root (required)")
	f.StringVar(&cf.caFile, "master-ca-file", "", "PEM CA of the masters' HTTPS certificates (default: the system's)")
}

// client builds the client.
func (cf *clusterFlags) client() (*clusterClient, error) {
	masters := splitList(cf.masters)
	if len(masters) == 0 {
		return nil, errors.New("no master: give --master URL (or set SQUALL_MASTER)")
	}
	if cf.tokenFile == "" {
		return nil, errors.New("no token: give --token-file FILE (or set SQUALL_TOKEN_FILE)")
	}
	tok, err := readTokenFile("token-file (SQUALL_TOKEN_FILE)", cf.tokenFile)
	if err != nil {
		return nil, err
	}
	c := &clusterClient{token: tok, http: &http.Client{}}
	if cf.caFile != "" {
		if c.http, err = clientWithCA(cf.caFile); err != nil {
			return nil, fmt.Errorf("--master-ca-file (SQUALL_MASTER_CA_FILE): %w", err)
		}
	}
	for _, m := range masters {
		c.masters = append(c.masters, strings.TrimRight(m, "/"))
	}
	return c, nil
}

// answerError is a master's error answer.
type answerError struct {
	Status  int
	Code    string
	Message string
	Params  map[string]string
	// RetryAfter is the Retry-After header, if any.
	RetryAfter string
}

func (e *answerError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// retryable reports an answer a later attempt may not get: a 503 (no
// leader, leader lost or unavailable, not ready) or a 502.
func (e *answerError) retryable() bool {
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusBadGateway
}

// request sends a request to base and returns the response of a 2xx
// answer, else an *answerError (or the transport's error).
func (c *clusterClient) request(ctx context.Context, method, base, path string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &answerError{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if json.Unmarshal(b, e) != nil || e.Code == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	return nil, e
}

// getJSON reads the JSON answer of GET base+path into out.
func (c *clusterClient) getJSON(ctx context.Context, base, path string, out any) error {
	resp, err := c.request(ctx, http.MethodGet, base, path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := decodeJSONBody(resp.Body, out); err != nil {
		return fmt.Errorf("GET %s%s: %w", base, path, err)
	}
	return nil
}

// decodeJSONBody reads a JSON answer body into out.
func decodeJSONBody(r io.Reader, out any) error {
	if err := json.NewDecoder(io.LimitReader(r, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	return nil
}
