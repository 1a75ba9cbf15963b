package action

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// newTestFindingExecutor returns a finding executor whose only master is an
// httptest server running h, with the token "tok".
func newTestFindingExecutor(t testing.TB, h http.Handler) *findingExecutor {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newTestFindingExecutorURLs(t, srv.URL)
}

func newTestFindingExecutorURLs(t testing.TB, urls ...string) *findingExecutor {
	t.Helper()
	tok := filetest.Write(t, t.TempDir(), "token", "s3cr3t-token\n")
	cfg := Default().Finding
	cfg.MasterURLs, cfg.TokenFile = urls, tok
	f, err := newFindingExecutor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// The findings API itself is exercised in finding_master_test.go against a
// real master cluster; these cases check the classification of answers.
func TestFindingExecutor_answers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
		retry   bool
	}{
		{name: "201", status: 201, body: `{"uid": "u"}`},
		{name: "200 existing", status: 200, body: `{"uid": "u"}`},
		{name: "400 with code", status: 400, body: `{"code": "FIELD_REQUIRED", "params": {"FIELD": "tool_code"}, "message": "tool_code is required"}`,
			wantErr: "status 400 FIELD_REQUIRED: tool_code is required"},
		{name: "401", status: 401, body: `{"code": "UNAUTHORIZED", "message": "bad token"}`, wantErr: "UNAUTHORIZED"},
		{name: "404 without body", status: 404, wantErr: "status 404"},
		{name: "429", status: 429, wantErr: "status 429", retry: true},
		{name: "503 no leader", status: 503, body: `{"code": "NO_LEADER", "message": "x"}`, wantErr: "NO_LEADER", retry: true},
		{name: "500", status: 500, wantErr: "status 500", retry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got atomic.Pointer[http.Request]
			var gotBody atomic.Value
			f := newTestFindingExecutor(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				gotBody.Store(string(b))
				got.Store(r)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			p := payload(t, `{"monitored_domain_id": 7, "tool_code": "leakmon", "username": "bob", "hash": "abc", "hash_algorithm": "sha1"}`)
			err := f.Execute(t.Context(), testAction(IDFinding, p))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || Retriable(err) != tt.retry {
					t.Fatalf("Execute: %v (retriable %v), want %q (retriable %v)", err, Retriable(err), tt.wantErr, tt.retry)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("the token shows in %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			r := got.Load()
			if r.Method != http.MethodPut || r.URL.Path != "/intel/api/sdk/v0/findings/credentials" ||
				r.Header.Get("Authorization") != "Bearer s3cr3t-token" || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("request %s %s %v", r.Method, r.URL.Path, r.Header)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(gotBody.Load().(string)), &body); err != nil || len(body) != 5 || body["monitored_domain_id"] != 7.0 {
				t.Errorf("body %v (%v)", body, err)
			}
		})
	}
}

func TestFindingExecutor_failsOver(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(ok.Close)
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(noLeader.Close)
	f := newTestFindingExecutorURLs(t, "http://127.0.0.1:1", noLeader.URL, ok.URL+"/")
	if err := f.Execute(t.Context(), testAction(IDFinding, map[string]any{"monitored_domain_id": 1})); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls to the working master", calls.Load())
	}
	down := newTestFindingExecutorURLs(t, "http://127.0.0.1:1")
	if err := down.Execute(t.Context(), testAction(IDFinding, map[string]any{"monitored_domain_id": 1})); !Retriable(err) {
		t.Fatalf("no master up: %v, want retriable", err)
	}
}

func TestFindingExecutor_tokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filetest.Write(t, dir, "empty", " \n")
	for _, path := range []string{filepath.Join(dir, "missing"), empty} {
		cfg := testConfig()
		cfg.Finding.MasterURLs, cfg.Finding.TokenFile = []string{"http://127.0.0.1:1"}, path
		if _, err := NewRegistry(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "finding.token_file") {
			t.Errorf("token file %s: NewRegistry: %v", path, err)
		}
	}
}
