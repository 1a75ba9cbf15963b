package action

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/squallhq/squall/engine/tree"
)

// findingPath is the findings API endpoint, under a master URL.
const findingPath = "/intel/api/sdk/v0/findings/credentials"

// findingFields are the payload fields of a finding action and whether each
// is a string (monitored_domain_id is an integer).
var findingFields = map[string]bool{
	"monitored_domain_id": false,
	"tool_code":           true,
	"resource_url":        true,
	"username":            true,
	"password":            true,
	"hash":                true,
	"hash_algorithm":      true,
}

// findingExecutor inserts a credential finding through the findings API
// (PUT {master}/intel/api/sdk/v0/findings/credentials, docs/findings.md).
// The payload is the request body: monitored_domain_id (integer),
// tool_code, resource_url, username, password, hash and hash_algorithm
// (strings); other fields are refused. The API checks the rest (required
// fields, password and/or hash).
//
// 201 (a new or a repeated finding) and 200 (a repeat, as masters before
// X-Squall-Duplicate answered it) succeed. Masters are tried in
// order while the failure is retriable (a follower without a leader, a
// node down). A 4xx answer is permanent and its error carries the API's
// error code; 5xx, 429, network errors and timeouts are retriable. The
// token never appears in errors or logs.
type findingExecutor struct {
	client  *http.Client
	urls    []string
	token   string
	timeout time.Duration
	// tracing passes the trace on to the masters (traceparent).
	tracing bool
}

var (
	_ Executor  = (*findingExecutor)(nil)
	_ io.Closer = (*findingExecutor)(nil)
)

// newFindingExecutor reads the token file and builds the executor.
func newFindingExecutor(cfg FindingConfig, client *http.Client) (*findingExecutor, error) {
	b, err := readSecretFile(cfg.TokenFile)
	if err != nil {
		return nil, &ConfigError{Field: "finding.token_file", Err: err}
	}
	urls := make([]string, len(cfg.MasterURLs))
	for i, u := range cfg.MasterURLs {
		urls[i] = strings.TrimRight(u, "/") + findingPath
	}
	return &findingExecutor{client: noRedirectClient(client), urls: urls, token: b, timeout: time.Duration(cfg.Timeout)}, nil
}

// readSecretFile returns the trimmed content of a secret file; its text
// never appears in the error.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// Execute sends the finding.
func (f *findingExecutor) Execute(ctx context.Context, a tree.Action) error {
	for k, v := range a.Payload {
		isString, ok := findingFields[k]
		if !ok {
			return payloadError(IDFinding, k, "is not a finding field")
		}
		if v == nil {
			continue
		}
		if isString {
			if _, ok := v.(string); !ok {
				return payloadError(IDFinding, k, "must be a string")
			}
		} else if !isJSONInteger(v) {
			return payloadError(IDFinding, k, "must be an integer")
		}
	}
	if _, ok := a.Payload["monitored_domain_id"]; !ok {
		return payloadError(IDFinding, "monitored_domain_id", "is required")
	}
	body, err := json.Marshal(a.Payload)
	if err != nil {
		return payloadError(IDFinding, "payload", "is not JSON: "+err.Error())
	}
	var last error
	for _, u := range f.urls {
		last = f.put(ctx, u, body)
		if last == nil || !Retriable(last) || ctx.Err() != nil {
			return last
		}
	}
	return last
}

// put sends the body to one master.
func (f *findingExecutor) put(ctx context.Context, u string, body []byte) error {
	reqCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return NewPermanent(fmt.Errorf("finding PUT %s: %w", u, unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.token)
	if f.tracing {
		traceRequest(ctx, req, redactedURL(u))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		err = requestError(ctx, reqCtx, f.timeout, err)
		return NewRetriable(fmt.Errorf("finding PUT %s: %w", u, err))
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain))
	if f.tracing {
		traceStatus(ctx, resp.StatusCode)
	}
	if err != nil {
		return NewRetriable(fmt.Errorf("finding PUT %s: read response: %w", u, err))
	}
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
		return nil
	}
	var apiErr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(answer, &apiErr)
	statusErr := &FindingError{URL: u, StatusCode: resp.StatusCode, Code: apiErr.Code, Message: apiErr.Message}
	if c := resp.StatusCode; c >= 500 || c == http.StatusRequestTimeout || c == http.StatusTooManyRequests {
		return NewRetriable(statusErr)
	}
	return NewPermanent(statusErr)
}

// Close closes the idle connections.
func (f *findingExecutor) Close() error {
	f.client.CloseIdleConnections()
	return nil
}

// FindingError reports a finding action refused by the findings API.
type FindingError struct {
	// URL is the findings endpoint.
	URL string
	// StatusCode is the response status.
	StatusCode int
	// Code and Message are the API's error code (such as
	// "FIELD_REQUIRED") and message, empty if the answer had none.
	Code, Message string
}

// Error implements error.
func (e *FindingError) Error() string {
	s := fmt.Sprintf("finding PUT %s: status %d", e.URL, e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// isJSONInteger reports whether v, a decoded JSON value, is an integer.
func isJSONInteger(v any) bool {
	switch n := v.(type) {
	case json.Number:
		_, err := n.Int64()
		return err == nil
	case float64:
		return n == float64(int64(n))
	case int, int64, int32:
		return true
	}
	return false
}
