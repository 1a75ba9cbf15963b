package action

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/squallhq/squall/engine/tree"
)

// elasticsearchExecutor indexes one document per action (Tornado §7.3):
// payload endpoint (string; default elasticsearch.default_endpoint), index
// (string, required), data (any JSON, required) and auth (optional:
// {"type": "None"} sends no credentials). It POSTs data to
// <endpoint>/<index>/_doc/, the index percent-encoded byte by byte except
// ASCII letters and digits.
//
// The endpoint must be the default endpoint or one of
// elasticsearch.allowed_endpoints: the configured credentials (basic auth
// or API key) are sent to those only. A 2xx answer succeeds; 5xx, 429,
// network errors and timeouts are retriable; other statuses are permanent.
// Credentials never appear in errors or logs.
//
// It uses net/http rather than the official client's bulk indexer: an
// action's outcome (retriable or permanent) must be known when Execute
// returns, which the asynchronous bulk indexer does not give without
// per-item callbacks and a flush per action.
type elasticsearchExecutor struct {
	client   *http.Client
	timeout  time.Duration
	def      string
	allowed  []string
	user     string
	password string
	apiKey   string
}

var (
	_ Executor  = (*elasticsearchExecutor)(nil)
	_ io.Closer = (*elasticsearchExecutor)(nil)
)

func newElasticsearchExecutor(cfg ElasticsearchConfig, client *http.Client) (*elasticsearchExecutor, error) {
	e := &elasticsearchExecutor{
		timeout: time.Duration(cfg.Timeout),
		def:     strings.TrimRight(cfg.DefaultEndpoint, "/"),
		user:    cfg.Username,
	}
	for _, u := range cfg.AllowedEndpoints {
		e.allowed = append(e.allowed, strings.TrimRight(u, "/"))
	}
	if cfg.PasswordFile != "" {
		s, err := readSecretFile(cfg.PasswordFile)
		if err != nil {
			return nil, &ConfigError{Field: "elasticsearch.password_file", Err: err}
		}
		e.password = s
	}
	if cfg.APIKeyFile != "" {
		s, err := readSecretFile(cfg.APIKeyFile)
		if err != nil {
			return nil, &ConfigError{Field: "elasticsearch.api_key_file", Err: err}
		}
		e.apiKey = s
	}
	var c http.Client
	if client != nil {
		c = *client
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = &c
	return e, nil
}

// Execute indexes the document.
func (e *elasticsearchExecutor) Execute(ctx context.Context, a tree.Action) error {
	endpoint := e.def
	if v, ok := a.Payload["endpoint"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return payloadError(IDElasticsearch, "endpoint", "must be a non-empty string")
		}
		endpoint = strings.TrimRight(s, "/")
		if endpoint != e.def && !slices.Contains(e.allowed, endpoint) {
			return payloadError(IDElasticsearch, "endpoint", "is not the default endpoint nor in elasticsearch.allowed_endpoints")
		}
	}
	if endpoint == "" {
		return payloadError(IDElasticsearch, "endpoint", "is required without elasticsearch.default_endpoint")
	}
	index, ok := a.Payload["index"].(string)
	if !ok || index == "" {
		return payloadError(IDElasticsearch, "index", "must be a non-empty string")
	}
	data, ok := a.Payload["data"]
	if !ok {
		return payloadError(IDElasticsearch, "data", "is required")
	}
	withAuth := true
	if v, ok := a.Payload["auth"]; ok {
		m, _ := v.(map[string]any)
		if t, _ := m["type"].(string); t != "None" {
			return payloadError(IDElasticsearch, "auth", `must be {"type": "None"} (other types are not supported)`)
		}
		withAuth = false
	}
	body, err := json.Marshal(data)
	if err != nil {
		return payloadError(IDElasticsearch, "data", "is not JSON: "+err.Error())
	}

	target := endpoint + "/" + escapeIndex(index) + "/_doc/"
	reqCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return NewPermanent(fmt.Errorf("elasticsearch POST %s: %w", target, unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	if withAuth {
		switch {
		case e.apiKey != "":
			req.Header.Set("Authorization", "ApiKey "+e.apiKey)
		case e.user != "":
			req.SetBasicAuth(e.user, e.password)
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no response within %s: %w", e.timeout, context.DeadlineExceeded)
		} else {
			err = unwrapURLError(err)
		}
		return NewRetriable(fmt.Errorf("elasticsearch POST %s: %w", target, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if err := resp.Body.Close(); err != nil {
		return NewRetriable(fmt.Errorf("elasticsearch POST %s: read response: %w", target, err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	statusErr := &StatusError{Method: http.MethodPost, URL: target, StatusCode: resp.StatusCode}
	if c := resp.StatusCode; c >= 500 || c == http.StatusTooManyRequests {
		return NewRetriable(statusErr)
	}
	return NewPermanent(statusErr)
}

// escapeIndex percent-encodes every byte of the index name but ASCII
// letters and digits, as Tornado does.
func escapeIndex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Close closes the idle connections.
func (e *elasticsearchExecutor) Close() error {
	e.client.CloseIdleConnections()
	return nil
}
