package action

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Elasticsearch cannot run on this machine (no Docker, not packaged in
// Debian): these tests run against fakeElasticsearch, an httptest server
// that implements the one endpoint the executor uses (POST
// /{index}/_doc/, answering 201 with an _id) and GET /{index}/_doc/{id}
// to read documents back, and that records every request to check it.

// fakeElasticsearch stores the documents indexed, by raw index path.
type fakeElasticsearch struct {
	*httptest.Server
	mu     sync.Mutex
	docs   map[string][]string // raw (escaped) index -> documents
	auth   []string            // Authorization headers received
	status int                 // answer instead of indexing when not 0
}

func newFakeElasticsearch(t testing.TB) *fakeElasticsearch {
	f := &fakeElasticsearch{docs: map[string][]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeElasticsearch) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	switch {
	case r.Method == http.MethodPost && len(parts) == 3 && parts[1] == "_doc" && parts[2] == "":
		if f.status != 0 {
			w.WriteHeader(f.status)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || !json.Valid(b) {
			http.Error(w, `{"error": "not json"}`, http.StatusBadRequest)
			return
		}
		f.docs[parts[0]] = append(f.docs[parts[0]], string(b))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"_id": "x", "result": "created"}`))
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "_doc":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"docs": f.docs[parts[0]]})
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
	}
}

// documents returns the documents of a raw index path.
func (f *fakeElasticsearch) documents(index string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.docs[index]...)
}

func newTestElasticsearchExecutor(t testing.TB, endpoint string, modify func(*ElasticsearchConfig)) *elasticsearchExecutor {
	t.Helper()
	cfg := Default().Elasticsearch
	cfg.DefaultEndpoint = endpoint
	if modify != nil {
		modify(&cfg)
	}
	e, err := newElasticsearchExecutor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestElasticsearchExecutor(t *testing.T) {
	t.Parallel()
	secret := func(t *testing.T, s string) string {
		p := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name      string
		payload   string
		status    int // the fake's answer, 0 to index
		cfg       func(t *testing.T, c *ElasticsearchConfig)
		wantIndex string
		wantDoc   string
		wantAuth  string
		wantErr   string
		retry     bool
	}{
		{name: "default endpoint", payload: `{"index": "logs", "data": {"a": 1.50, "b": [null]}}`,
			wantIndex: "logs", wantDoc: `{"a":1.50,"b":[null]}`},
		{name: "index escaped byte by byte", payload: `{"index": "a-b/ü c", "data": "x"}`,
			wantIndex: "a%2Db%2F%C3%BC%20c", wantDoc: `"x"`},
		{name: "basic auth", payload: `{"index": "i", "data": 1}`,
			cfg: func(t *testing.T, c *ElasticsearchConfig) {
				c.Username, c.PasswordFile = "squall", secret(t, "s3cret")
			},
			wantIndex: "i", wantDoc: `1`, wantAuth: "Basic c3F1YWxsOnMzY3JldA=="},
		{name: "api key", payload: `{"index": "i", "data": 1}`,
			cfg:       func(t *testing.T, c *ElasticsearchConfig) { c.APIKeyFile = secret(t, "aWQ6a2V5") },
			wantIndex: "i", wantDoc: `1`, wantAuth: "ApiKey aWQ6a2V5"},
		{name: "auth None sends no credentials", payload: `{"index": "i", "data": 1, "auth": {"type": "None"}}`,
			cfg:       func(t *testing.T, c *ElasticsearchConfig) { c.APIKeyFile = secret(t, "k") },
			wantIndex: "i", wantDoc: `1`},
		{name: "429 retriable", payload: `{"index": "i", "data": 1}`, status: 429, wantErr: "status 429", retry: true},
		{name: "503 retriable", payload: `{"index": "i", "data": 1}`, status: 503, wantErr: "status 503", retry: true},
		{name: "400 permanent", payload: `{"index": "i", "data": 1}`, status: 400, wantErr: "status 400"},
		{name: "403 permanent", payload: `{"index": "i", "data": 1}`, status: 403, wantErr: "status 403"},
		{name: "endpoint not allowed", payload: `{"index": "i", "data": 1, "endpoint": "http://127.0.0.1:1"}`,
			wantErr: "allowed_endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			es := newFakeElasticsearch(t)
			es.status = tt.status
			e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
				if tt.cfg != nil {
					tt.cfg(t, c)
				}
			})
			err := e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, tt.payload)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || Retriable(err) != tt.retry {
					t.Fatalf("Execute: %v (retriable %v), want %q (retriable %v)", err, Retriable(err), tt.wantErr, tt.retry)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := es.documents(tt.wantIndex); len(got) != 1 || got[0] != tt.wantDoc {
				t.Fatalf("index %s holds %q, want [%s]", tt.wantIndex, got, tt.wantDoc)
			}
			es.mu.Lock()
			defer es.mu.Unlock()
			if es.auth[0] != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", es.auth[0], tt.wantAuth)
			}
		})
	}
}

func TestElasticsearchExecutor_endpoints(t *testing.T) {
	t.Parallel()
	def, other := newFakeElasticsearch(t), newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, def.URL, func(c *ElasticsearchConfig) { c.AllowedEndpoints = []string{other.URL + "/"} })
	for _, p := range []string{
		`{"index": "a", "data": 1}`,
		`{"index": "a", "data": 2, "endpoint": "` + other.URL + `"}`,
		`{"index": "a", "data": 3, "endpoint": "` + def.URL + `/"}`,
	} {
		if err := e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	if got := def.documents("a"); strings.Join(got, ",") != "1,3" {
		t.Errorf("default endpoint holds %v", got)
	}
	if got := other.documents("a"); strings.Join(got, ",") != "2" {
		t.Errorf("allowed endpoint holds %v", got)
	}

	// A server down is retriable; the secret never shows in the error.
	down := newTestElasticsearchExecutor(t, "http://127.0.0.1:1", func(c *ElasticsearchConfig) { c.Username = "u" })
	err := down.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "a", "data": 1}`)))
	if !Retriable(err) {
		t.Fatalf("Execute on a closed port: %v, want retriable", err)
	}
}

func TestElasticsearchExecutor_missingSecretFile(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Elasticsearch.DefaultEndpoint = "http://127.0.0.1:1"
	cfg.Elasticsearch.APIKeyFile = filepath.Join(t.TempDir(), "missing")
	if _, err := NewRegistry(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "elasticsearch.api_key_file") {
		t.Fatalf("NewRegistry: %v", err)
	}
}
