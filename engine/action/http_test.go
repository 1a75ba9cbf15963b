package action

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/metrictest"
)

// request is what a test server received.
type request struct {
	method, path, query string
	header              http.Header
	body                string
}

// receiver is an httptest server that records requests and answers with
// the statuses it is given, in turn (the last one repeats).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	statuses []int
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	rc := &receiver{statuses: statuses}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests = append(rc.requests, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		status := http.StatusOK
		if len(rc.statuses) > 0 {
			status = rc.statuses[min(len(rc.requests), len(rc.statuses))-1]
		}
		rc.mu.Unlock()
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.requests...)
}

func TestHTTP_Execute_request(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		payload    string // ${URL} is replaced by the server's URL
		wantMethod string
		wantBody   string
		wantType   string
		wantHeader map[string]string
	}{
		{
			name:       "POST the payload without url, method and headers",
			payload:    `{"url": "${URL}/hook?x=1", "headers": {"X-Token": "s3cret", "X-Multi": "a"}, "event": {"n": 1.50}, "msg": "<hi>"}`,
			wantMethod: "POST",
			wantBody:   `{"event":{"n":1.50},"msg":"\u003chi\u003e"}`,
			wantType:   "application/json",
			wantHeader: map[string]string{"X-Token": "s3cret", "X-Multi": "a"},
		},
		{
			name:       "explicit body and method",
			payload:    `{"url": "${URL}/hook", "method": "put", "body": [1, "two"], "other": true}`,
			wantMethod: "PUT",
			wantBody:   `[1,"two"]`,
			wantType:   "application/json",
		},
		{
			name:       "content type from headers",
			payload:    `{"url": "${URL}/hook", "headers": {"Content-Type": "application/vnd.x+json"}, "body": null}`,
			wantMethod: "POST",
			wantBody:   `null`,
			wantType:   "application/vnd.x+json",
		},
		{
			name:       "GET sends no body",
			payload:    `{"url": "${URL}/hook", "method": "GET", "ignored": 1}`,
			wantMethod: "GET",
		},
		{
			name:       "DELETE with a body",
			payload:    `{"url": "${URL}/hook", "method": "DELETE", "body": {"id": 7}}`,
			wantMethod: "DELETE",
			wantBody:   `{"id":7}`,
			wantType:   "application/json",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t)
			h := newHTTPExecutor(testConfig().HTTP, nil)
			p := payload(t, strings.ReplaceAll(tt.payload, "${URL}", rc.URL))
			if err := h.Execute(t.Context(), tree.Action{ID: IDHTTP, Payload: p}); err != nil {
				t.Fatal(err)
			}
			reqs := rc.received()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != tt.wantMethod || r.path != "/hook" || r.body != tt.wantBody {
				t.Errorf("got %s %s %q, want %s /hook %q", r.method, r.path, r.body, tt.wantMethod, tt.wantBody)
			}
			if got := r.header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type %q, want %q", got, tt.wantType)
			}
			for k, v := range tt.wantHeader {
				if got := r.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestHTTP_Execute_status(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status        int
		wantRetriable bool
	}{
		{http.StatusNoContent, false},
		{http.StatusFound, false}, // not followed
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusNotFound, false},
		{http.StatusRequestTimeout, true},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, tt.status)
			h := newHTTPExecutor(testConfig().HTTP, nil)
			err := h.Execute(t.Context(), tree.Action{Payload: map[string]any{"url": rc.URL}})
			if tt.status < 300 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tt.status || Retriable(err) != tt.wantRetriable {
				t.Fatalf("Execute: %v, want status %d retriable=%v", err, tt.status, tt.wantRetriable)
			}
			if n := len(rc.received()); n != 1 {
				t.Fatalf("%d requests, want 1 (redirects are not followed)", n)
			}
		})
	}
}

func TestHTTP_retriesThroughRegistry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		statuses  []int
		wantCalls int
		wantErr   bool
	}{
		{"503 then success", []int{503, 503, 200}, 3, false},
		{"404 is not retried", []int{404}, 1, true},
		{"5xx until exhausted", []int{500}, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, tt.statuses...)
			cfg := testConfig() // millisecond delays: the server is real
			cfg.Retry.MaxAttempts = 3
			r, reg := newTestRegistry(t, cfg, Deps{})
			err := r.Run(t.Context(), tree.Action{ID: IDHTTP, Payload: map[string]any{"url": rc.URL, "n": 1}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Run: %v", err)
			}
			if n := len(rc.received()); n != tt.wantCalls {
				t.Fatalf("%d requests, want %d", n, tt.wantCalls)
			}
			for _, req := range rc.received() {
				if req.body != `{"n":1}` {
					t.Fatalf("body %q of a retry", req.body)
				}
			}
			if got := metrictest.Sum(t, reg, "squall_action_retried_total", map[string]string{"action": IDHTTP}); got != float64(tt.wantCalls-1) {
				t.Errorf("retried = %v, want %d", got, tt.wantCalls-1)
			}
		})
	}
}

func TestHTTP_Execute_refused(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	cfg := testConfig().HTTP
	cfg.AllowedSchemes = []string{"https"}
	cfg.AllowedHosts = []string{"hooks.example.com", "*.example.org"}
	h := newHTTPExecutor(cfg, nil)
	for _, u := range []string{rc.URL, "https://evil.example.com/", "https://example.org/", "https://xexample.org/"} {
		err := h.Execute(t.Context(), tree.Action{Payload: map[string]any{"url": u}})
		if !errors.Is(err, ErrInvalidPayload) || Retriable(err) {
			t.Errorf("%s: %v, want a permanent ErrInvalidPayload", u, err)
		}
	}
	if n := len(rc.received()); n != 0 {
		t.Fatalf("%d requests sent to a refused URL", n)
	}
	if err := h.allowed(mustParseURL(t, "https://a.b.example.org/x")); err != nil {
		t.Errorf("subdomain refused: %v", err)
	}
	if err := h.allowed(mustParseURL(t, "https://HOOKS.example.com:8443/x")); err != nil {
		t.Errorf("allowed host refused: %v", err)
	}
}

func TestHTTP_allowed(t *testing.T) {
	t.Parallel()
	cfg := testConfig().HTTP
	cfg.AllowedHosts = []string{"::1", "10.0.0.1", "*.example.org"}
	h := newHTTPExecutor(cfg, nil)
	for u, want := range map[string]bool{
		"http://[::1]:8080/x":             true,
		"http://[0:0::1]/x":               true,
		"http://10.0.0.1/x":               true,
		"http://[::ffff:10.0.0.1]/x":      true,
		"http://10.0.0.2/x":               false,
		"http://127.0.0.1/x":              false,
		"http://a.example.org/x":          true,
		"http://169.254.169.254/x":        false,
		"http://metadata.internal/x":      false,
		"http://example.org.evil.test/x":  false,
		"http://a.example.org.evil.test/": false,
	} {
		if err := h.allowed(mustParseURL(t, u)); (err == nil) != want {
			t.Errorf("%s: allowed = %v, want %v", u, err, want)
		}
	}
	cfg.AllowedHosts, cfg.AllowAnyHost = nil, true
	if err := newHTTPExecutor(cfg, nil).allowed(mustParseURL(t, "http://169.254.169.254/")); err != nil {
		t.Errorf("allow_any_host: %v", err)
	}
}

func TestHTTP_Execute_timeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	cfg := testConfig().HTTP
	cfg.Timeout = Duration(100 * time.Millisecond)
	h := newHTTPExecutor(cfg, nil)
	err := h.Execute(t.Context(), tree.Action{Payload: map[string]any{"url": srv.URL}})
	if !Retriable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Execute: %v, want a retriable timeout", err)
	}
}

func TestHTTP_secretsNotLogged(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, 500)
	log, logs := newTestLogger()
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 2
	r, _ := newTestRegistry(t, cfg, Deps{Logger: log})
	err := r.Run(t.Context(), tree.Action{ID: IDHTTP, Payload: map[string]any{
		"url":     strings.Replace(rc.URL, "http://", "http://user:pa55word@", 1) + "/hook?token=t0ken",
		"headers": map[string]any{"Authorization": "Bearer s3cret"},
	}})
	if err == nil {
		t.Fatal("Run succeeded against a 500")
	}
	if got := rc.received()[0].header.Get("Authorization"); got != "Bearer s3cret" {
		t.Fatalf("Authorization %q not sent", got)
	}
	text := err.Error() + logs.String()
	for _, secret := range []string{"s3cret", "t0ken", "pa55word"} {
		if strings.Contains(text, secret) {
			t.Errorf("%q appears in the error or the logs:\n%s", secret, text)
		}
	}
	if !strings.Contains(logs.String(), "/hook") {
		t.Errorf("the retry log does not name the target:\n%s", logs)
	}

	// A network error (nothing listens) does not quote the URL either.
	rc.Close()
	err = r.Run(t.Context(), tree.Action{ID: IDHTTP, Payload: map[string]any{"url": rc.URL + "/?token=t0ken"}})
	if err == nil || !Retriable(err) || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("network error: %v", err)
	}
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
