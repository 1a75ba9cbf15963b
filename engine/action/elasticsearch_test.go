package action

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/metrictest"
)

// Elasticsearch cannot run on this machine (no Docker, not packaged in
// Debian): these tests run against fakeElasticsearch, an httptest server
// that speaks the _bulk protocol the official client uses (NDJSON request,
// per-item results, the X-Elastic-Product header the client checks), stores
// the documents by index and records every request.

// fakeElasticsearch is an Elasticsearch _bulk endpoint.
type fakeElasticsearch struct {
	*httptest.Server
	mu       sync.Mutex
	docs     map[string][]string // index -> documents stored
	seen     map[string]int      // index + "\x00" + document -> times received
	ids      map[string]bool     // index + "\x00" + _id of the documents stored with one
	requests []fakeBulkRequest
	// itemFail, when set, decides a document's fate: a status other than 0
	// refuses it with that status, error type and reason. seen counts the
	// earlier receptions of the same document.
	itemFail func(index, doc string, seen int) (status int, errType, reason string)
	// requestFail, when set, answers the n-th request (1-based) with the
	// status and an error body instead of processing it, when not 0.
	requestFail func(n int) int
	// dropItem makes the response leave out the last result.
	dropItem bool
	// noProduct leaves out the X-Elastic-Product header.
	noProduct bool
	// gate, when set, holds the first request until it is closed; arrived
	// is then closed when the first request arrives.
	gate, arrived chan struct{}
	count         int // requests arrived
	// release, when set, holds every request until it receives a value;
	// active counts the requests being served, maxActive its peak.
	release           chan struct{}
	active, maxActive int
}

// fakeBulkRequest is one _bulk request received.
type fakeBulkRequest struct {
	auth        string // Authorization header
	docs        int
	traceparent string // traceparent header
}

func newFakeElasticsearch(t testing.TB) *fakeElasticsearch {
	f := &fakeElasticsearch{docs: map[string][]string{}, seen: map[string]int{}}
	f.Server = httptest.NewServer(f)
	t.Cleanup(f.Close)
	return f
}

// newFakeElasticsearchTLS is a fakeElasticsearch over TLS and the PEM file of
// its certificate.
func newFakeElasticsearchTLS(t testing.TB) (*fakeElasticsearch, string) {
	f := &fakeElasticsearch{docs: map[string][]string{}, seen: map[string]int{}}
	f.Server = httptest.NewUnstartedServer(f)
	// The test of an untrusted certificate makes the server log a failed
	// handshake.
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.StartTLS()
	t.Cleanup(f.Close)
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, p
}

// bulkAnswer is one document's result in a _bulk response.
type bulkAnswer struct {
	Index  string `json:"_index"`
	ID     string `json:"_id,omitempty"`
	Result string `json:"result,omitempty"`
	Status int    `json:"status"`
	Error  *struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"error,omitempty"`
}

func (f *fakeElasticsearch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.release != nil {
		f.mu.Lock()
		f.active++
		f.maxActive = max(f.maxActive, f.active)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.active--
			f.mu.Unlock()
		}()
		<-f.release
	}
	if !f.noProduct {
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
	}
	w.Header().Set("Content-Type", "application/json")
	fail := func(status int, errType, reason string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": errType, "reason": reason}, "status": status})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/_bulk" {
		fail(http.StatusNotFound, "not_found", r.Method+" "+r.URL.Path)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" && ct != "application/x-ndjson" {
		fail(http.StatusNotAcceptable, "media_type_header_exception", "Content-Type "+ct)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil || !bytes.HasSuffix(body, []byte("\n")) {
		fail(http.StatusBadRequest, "illegal_argument_exception", "The bulk request must be terminated by a newline [\\n]")
		return
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines)%2 != 0 {
		fail(http.StatusBadRequest, "illegal_argument_exception", "odd number of lines")
		return
	}

	f.mu.Lock()
	f.count++
	if f.count == 1 && f.gate != nil {
		f.mu.Unlock()
		close(f.arrived)
		<-f.gate
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	f.requests = append(f.requests, fakeBulkRequest{auth: r.Header.Get("Authorization"), docs: len(lines) / 2, traceparent: r.Header.Get("Traceparent")})
	if f.requestFail != nil {
		if status := f.requestFail(len(f.requests)); status != 0 {
			fail(status, "fake_exception", fmt.Sprintf("request %d refused", len(f.requests)))
			return
		}
	}
	var resp struct {
		Took   int                     `json:"took"`
		Errors bool                    `json:"errors"`
		Items  []map[string]bulkAnswer `json:"items"`
	}
	for i := 0; i < len(lines); i += 2 {
		var meta map[string]struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &meta); err != nil || len(meta) != 1 {
			fail(http.StatusBadRequest, "action_request_validation_exception", "bad action line "+lines[i])
			return
		}
		for op, m := range meta {
			doc := lines[i+1]
			a := bulkAnswer{Index: m.Index}
			key := m.Index + "\x00" + doc
			seen := f.seen[key]
			f.seen[key]++
			status, errType, reason := 0, "", ""
			if f.itemFail != nil {
				status, errType, reason = f.itemFail(m.Index, doc, seen)
			}
			switch {
			case op != "create" && op != "index":
				a.Status, status, errType, reason = 400, 400, "illegal_argument_exception", "unsupported action "+op
			case !json.Valid([]byte(doc)):
				status, errType, reason = 400, "document_parsing_exception", "not JSON"
			case status == 0 && op == "create" && m.ID != "" && f.ids[m.Index+"\x00"+m.ID]:
				status, errType, reason = http.StatusConflict, "version_conflict_engine_exception", "["+m.ID+"]: version conflict, document already exists"
			}
			if status != 0 {
				a.Status = status
				a.Error = &struct {
					Type   string `json:"type"`
					Reason string `json:"reason"`
				}{errType, reason}
				resp.Errors = true
			} else {
				f.docs[m.Index] = append(f.docs[m.Index], doc)
				a.ID, a.Result, a.Status = fmt.Sprint(len(f.docs[m.Index])), "created", http.StatusCreated
				if m.ID != "" {
					if f.ids == nil {
						f.ids = map[string]bool{}
					}
					f.ids[m.Index+"\x00"+m.ID] = true
					a.ID = m.ID
				}
			}
			resp.Items = append(resp.Items, map[string]bulkAnswer{op: a})
		}
	}
	if f.dropItem {
		resp.Items = resp.Items[:len(resp.Items)-1]
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// documents returns the documents stored in an index.
func (f *fakeElasticsearch) documents(index string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.docs[index])
}

// received returns the _bulk requests received.
func (f *fakeElasticsearch) received() []fakeBulkRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// newTestElasticsearchExecutor returns an executor for endpoint, closed
// when the test ends.
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

// added returns the documents added to the executor's batchers.
func (e *elasticsearchExecutor) added() uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var n uint64
	for _, b := range e.batchers {
		b.mu.Lock()
		n += b.added
		b.mu.Unlock()
	}
	return n
}

// waitAdded waits until n documents were added to the executor's batchers.
func waitAdded(t testing.TB, e *elasticsearchExecutor, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for e.added() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d documents added, want %d", e.added(), n)
		}
		<-tick.C
	}
}

// writeSecret writes s and a newline to a new file and returns its path.
func writeSecret(t testing.TB, s string) string {
	t.Helper()
	p := filetest.Write(t, t.TempDir(), "secret", s+"\n")
	return p
}

func TestElasticsearchExecutor(t *testing.T) {
	t.Parallel()
	refuse := func(status int, errType, reason string) func(string, string, int) (int, string, string) {
		return func(string, string, int) (int, string, string) { return status, errType, reason }
	}
	tests := []struct {
		name        string
		payload     string
		cfg         func(t *testing.T, c *ElasticsearchConfig)
		itemFail    func(index, doc string, seen int) (int, string, string)
		requestFail int
		wantIndex   string
		wantDoc     string
		wantAuth    string
		wantErr     string
		retry       bool
	}{
		{name: "default endpoint", payload: `{"index": "logs", "data": {"a": 1.50, "b": [null], "c": "<x>"}}`,
			wantIndex: "logs", wantDoc: `{"a":1.50,"b":[null],"c":"\u003cx\u003e"}`},
		{name: "index name sent as is", payload: `{"index": "a-b/ü c\"", "data": "x"}`,
			wantIndex: "a-b/ü c\"", wantDoc: `"x"`},
		{name: "basic auth", payload: `{"index": "i", "data": 1}`,
			cfg: func(t *testing.T, c *ElasticsearchConfig) {
				c.Username, c.PasswordFile = "squall", writeSecret(t, "s3cret")
			},
			wantIndex: "i", wantDoc: `1`, wantAuth: "Basic c3F1YWxsOnMzY3JldA=="},
		{name: "api key", payload: `{"index": "i", "data": 1}`,
			cfg: func(t *testing.T, c *ElasticsearchConfig) { c.APIKeyFile = writeSecret(t, "aWQ6a2V5") },
			// The official client spells the scheme APIKey; Elasticsearch
			// reads it case-insensitively.
			wantIndex: "i", wantDoc: `1`, wantAuth: "APIKey aWQ6a2V5"},
		{name: "auth None sends no credentials", payload: `{"index": "i", "data": 1, "auth": {"type": "None"}}`,
			cfg:       func(t *testing.T, c *ElasticsearchConfig) { c.APIKeyFile = writeSecret(t, "k") },
			wantIndex: "i", wantDoc: `1`},
		{name: "document 400 mapping error permanent", payload: `{"index": "i", "data": {"n": "x"}}`,
			itemFail: refuse(400, "document_parsing_exception", "failed to parse field [n] of type [long]"),
			wantErr:  `index "i": status 400: document_parsing_exception: failed to parse field [n] of type [long]`},
		{name: "document 429 retriable", payload: `{"index": "i", "data": 1}`,
			itemFail: refuse(429, "es_rejected_execution_exception", "rejected execution"),
			wantErr:  "status 429: es_rejected_execution_exception: rejected execution", retry: true},
		{name: "document 503 retriable", payload: `{"index": "i", "data": 1}`,
			itemFail: refuse(503, "unavailable_shards_exception", "primary shard is not active"),
			wantErr:  "status 503: unavailable_shards_exception", retry: true},
		{name: "document 403 permanent", payload: `{"index": "i", "data": 1}`,
			itemFail: refuse(403, "security_exception", "action [indices:data/write/bulk[s]] is unauthorized"),
			wantErr:  "status 403: security_exception"},
		{name: "request 503 retriable", payload: `{"index": "i", "data": 1}`, requestFail: 503,
			wantErr: "_bulk request: status 503: fake_exception: request 1 refused", retry: true},
		{name: "request 429 retriable", payload: `{"index": "i", "data": 1}`, requestFail: 429,
			wantErr: "_bulk request: status 429", retry: true},
		{name: "request 401 permanent", payload: `{"index": "i", "data": 1}`, requestFail: 401,
			wantErr: "_bulk request: status 401"},
		{name: "endpoint not allowed", payload: `{"index": "i", "data": 1, "endpoint": "http://127.0.0.1:1"}`,
			wantErr: "allowed_endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			es := newFakeElasticsearch(t)
			es.itemFail = tt.itemFail
			if tt.requestFail != 0 {
				es.requestFail = func(int) int { return tt.requestFail }
			}
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
				var ee *ElasticsearchError
				if strings.Contains(tt.wantErr, "status") && (!errors.As(err, &ee) || ee.Endpoint != es.URL) {
					t.Errorf("error %v is not an *ElasticsearchError for %s", err, es.URL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := es.documents(tt.wantIndex); len(got) != 1 || got[0] != tt.wantDoc {
				t.Fatalf("index %s holds %q, want [%s]", tt.wantIndex, got, tt.wantDoc)
			}
			if reqs := es.received(); len(reqs) != 1 || reqs[0].auth != tt.wantAuth {
				t.Errorf("requests %+v, want one with Authorization %q", reqs, tt.wantAuth)
			}
		})
	}
}

// TestElasticsearchExecutor_batches checks that the documents of concurrent
// actions that arrive during a _bulk request go together in the next one.
// No timed flush (flush_interval 1h): a lone document is sent at once.
func TestElasticsearchExecutor_batches(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	es.gate, es.arrived = make(chan struct{}), make(chan struct{})
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.Workers = 1
		c.FlushInterval = Duration(time.Hour)
	})
	execute := func(n int, results chan<- error) {
		results <- e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "batch", "data": map[string]any{"n": n}}))
	}
	first := make(chan error, 1)
	go execute(0, first)
	<-es.arrived // the first request is held by the server

	const n = 20
	results := make(chan error, n)
	for i := 1; i <= n; i++ {
		go execute(i, results)
	}
	waitAdded(t, e, n+1)
	close(es.gate)
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	reqs := es.received()
	if len(reqs) < 2 || reqs[0].docs != 1 {
		t.Fatalf("requests %+v, want a first one of 1 document", reqs)
	}
	// All 20 were added during the first request; a document whose Add was
	// still running when the second flush began goes in a third.
	t.Logf("requests %+v", reqs)
	if len(reqs) > 4 {
		t.Errorf("%d documents in %d requests, want at most 4: %+v", n+1, len(reqs), reqs)
	}
	if docs := es.documents("batch"); len(docs) != n+1 {
		t.Errorf("%d documents indexed, want %d", len(docs), n+1)
	}
}

// TestElasticsearchExecutor_waitForBatch checks batches by size: with one
// worker, wait_for_batch, no timed flush and flush_bytes of five and a half
// documents, 20 concurrent actions make four requests of five documents,
// the first three flushed by size and the last by Close.
func TestElasticsearchExecutor_waitForBatch(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	const index = "batch"
	// Every document line is {"n":NN}; the indexer adds an action line.
	docLen := len(`{"create":{"_index":"batch"}}`+"\n") + len(`{"n":10}`+"\n")
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.Workers = 1
		c.WaitForBatch = true
		c.FlushInterval = Duration(time.Hour)
		c.FlushBytes = 5*docLen + docLen/2
	})
	results := make(chan error, 20)
	for n := 10; n < 30; n++ {
		go func() {
			results <- e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": index, "data": map[string]any{"n": n}}))
		}()
	}
	for range 15 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if reqs := es.received(); len(reqs) != 3 {
		t.Fatalf("%d requests after 15 results, want 3: %+v", len(reqs), reqs)
	}
	waitAdded(t, e, 20)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	reqs := es.received()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.docs != 5 {
			t.Errorf("request of %d documents, want 5: %+v", r.docs, reqs)
		}
	}
	docs := es.documents(index)
	slices.Sort(docs)
	for i, d := range docs {
		if want := fmt.Sprintf(`{"n":%d}`, i+10); d != want {
			t.Fatalf("documents %v, want n from 10 to 29", docs)
		}
	}
	if len(docs) != 20 {
		t.Fatalf("%d documents, want 20", len(docs))
	}
}

// TestElasticsearchExecutor_registry runs the executor through the registry:
// retries of documents and requests, Close flushing documents in flight.
func TestElasticsearchExecutor_registry(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, es *fakeElasticsearch, modify func(c *ElasticsearchConfig)) (*Registry, *elasticsearchExecutor, func(string) float64) {
		t.Helper()
		cfg := testConfig()
		cfg.Elasticsearch.DefaultEndpoint = es.URL
		if modify != nil {
			modify(&cfg.Elasticsearch)
		}
		r, reg := newTestRegistry(t, cfg, Deps{})
		metric := func(name string) float64 {
			return metrictest.Sum(t, reg, name, map[string]string{"action": IDElasticsearch})
		}
		return r, r.entries[IDElasticsearch].ex.(*elasticsearchExecutor), metric
	}

	t.Run("document 429 retried then indexed", func(t *testing.T) {
		t.Parallel()
		es := newFakeElasticsearch(t)
		es.itemFail = func(_, doc string, seen int) (int, string, string) {
			if doc == `"busy"` && seen == 0 {
				return 429, "es_rejected_execution_exception", "rejected execution of coordinating operation"
			}
			return 0, "", ""
		}
		r, _, metric := run(t, es, nil)
		if err := r.Run(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": "busy"}`))); err != nil {
			t.Fatal(err)
		}
		if got := es.documents("i"); !slices.Equal(got, []string{`"busy"`}) {
			t.Errorf("index holds %q", got)
		}
		if n := metric("squall_action_retried_total"); n != 1 {
			t.Errorf("retried %v, want 1", n)
		}
		if n := metric("squall_action_executed_total"); n != 1 {
			t.Errorf("executed %v, want 1", n)
		}
	})

	t.Run("document 400 fails at once", func(t *testing.T) {
		t.Parallel()
		es := newFakeElasticsearch(t)
		es.itemFail = func(string, string, int) (int, string, string) {
			return 400, "mapper_parsing_exception", "failed to parse field [ts] of type [date]"
		}
		r, _, metric := run(t, es, nil)
		err := r.Run(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": {"ts": "noon"}}`)))
		if err == nil || Retriable(err) || !strings.Contains(err.Error(), "mapper_parsing_exception: failed to parse field [ts] of type [date]") {
			t.Fatalf("Run: %v, want a permanent mapping error", err)
		}
		if reqs := es.received(); len(reqs) != 1 {
			t.Errorf("%d requests, want 1", len(reqs))
		}
		if n := metric("squall_action_retried_total"); n != 0 {
			t.Errorf("retried %v, want 0", n)
		}
	})

	t.Run("request 502 retried then indexed", func(t *testing.T) {
		t.Parallel()
		es := newFakeElasticsearch(t)
		es.requestFail = func(n int) int {
			if n <= 2 {
				return http.StatusBadGateway
			}
			return 0
		}
		r, _, metric := run(t, es, nil)
		if err := r.Run(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 7}`))); err != nil {
			t.Fatal(err)
		}
		if got := es.documents("i"); !slices.Equal(got, []string{"7"}) {
			t.Errorf("index holds %q", got)
		}
		if reqs, n := es.received(), metric("squall_action_retried_total"); len(reqs) != 3 || n != 2 {
			t.Errorf("%d requests and %v retries, want 3 and 2", len(reqs), n)
		}
	})

	t.Run("Close flushes documents in flight", func(t *testing.T) {
		t.Parallel()
		es := newFakeElasticsearch(t)
		r, e, _ := run(t, es, func(c *ElasticsearchConfig) {
			c.FlushInterval = Duration(time.Hour)
			c.WaitForBatch = true
			c.Workers = 1
		})
		results := make(chan error, 3)
		for i := range 3 {
			go func() {
				results <- r.Run(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": i}))
			}()
		}
		waitAdded(t, e, 3)
		if reqs := es.received(); len(reqs) != 0 {
			t.Fatalf("%d requests before Close, want none (flush_interval 1h)", len(reqs))
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := <-results; err != nil {
				t.Fatal(err)
			}
		}
		if reqs := es.received(); len(reqs) != 1 || reqs[0].docs != 3 {
			t.Errorf("requests %+v, want one of 3 documents", reqs)
		}
		err := r.Run(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": 4}))
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close: %v, want ErrClosed", err)
		}
		if err := e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": 4})); !errors.Is(err, ErrClosed) || Retriable(err) {
			t.Errorf("Execute after Close: %v, want a permanent ErrClosed", err)
		}
	})
}

func TestElasticsearchExecutor_cancel(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.FlushInterval = Duration(time.Hour)
		c.WaitForBatch = true
	})
	ctx, cancel := context.WithCancel(t.Context())
	result := make(chan error, 1)
	go func() { result <- e.Execute(ctx, testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 1}`))) }()
	waitAdded(t, e, 1)
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) || !Retriable(err) {
			t.Fatalf("Execute: %v, want a retriable context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Execute did not return after its context was canceled")
	}
}

func TestElasticsearchExecutor_endpoints(t *testing.T) {
	t.Parallel()
	def, other := newFakeElasticsearch(t), newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, def.URL, func(c *ElasticsearchConfig) {
		c.AllowedEndpoints = []string{other.URL + "/"}
		c.Username, c.PasswordFile = "u", writeSecret(t, "pw-123")
	})
	for _, p := range []string{
		`{"index": "a", "data": 1}`,
		`{"index": "a", "data": 2, "endpoint": "` + other.URL + `"}`,
		`{"index": "a", "data": 3, "endpoint": "` + def.URL + `/"}`,
		`{"index": "a", "data": 4, "auth": {"type": "None"}}`,
	} {
		if err := e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	if got := def.documents("a"); strings.Join(got, ",") != "1,3,4" {
		t.Errorf("default endpoint holds %v", got)
	}
	if got := other.documents("a"); strings.Join(got, ",") != "2" {
		t.Errorf("allowed endpoint holds %v", got)
	}
	var auths []string
	for _, r := range append(def.received(), other.received()...) {
		auths = append(auths, r.auth)
	}
	basic := "Basic dTpwdy0xMjM="
	if want := []string{basic, basic, "", basic}; !slices.Equal(auths, want) {
		t.Errorf("Authorization headers %q, want %q", auths, want)
	}

	// A server down is retriable; the secret never shows in the error.
	down := newTestElasticsearchExecutor(t, "http://127.0.0.1:1", func(c *ElasticsearchConfig) {
		c.Username, c.PasswordFile = "u", writeSecret(t, "pw-123")
	})
	err := down.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "a", "data": 1}`)))
	if !Retriable(err) || strings.Contains(err.Error(), "pw-123") || strings.Contains(err.Error(), "dTpwdy0xMjM") {
		t.Fatalf("Execute on a closed port: %v, want retriable without the password", err)
	}
}

func TestElasticsearchExecutor_tls(t *testing.T) {
	t.Parallel()
	es, ca := newFakeElasticsearchTLS(t)
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) { c.CAFile = ca })
	if err := e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 1}`))); err != nil {
		t.Fatal(err)
	}
	if got := es.documents("i"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("index holds %q", got)
	}

	// Without the CA, the server's certificate is not trusted.
	untrusted := newTestElasticsearchExecutor(t, es.URL, nil)
	err := untrusted.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 2}`)))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Execute without ca_file: %v, want a certificate error", err)
	}

	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.pem"), writeSecret(t, "not a certificate")} {
		cfg := Default().Elasticsearch
		cfg.DefaultEndpoint, cfg.CAFile = es.URL, bad
		if _, err := newElasticsearchExecutor(cfg, nil); err == nil || !strings.Contains(err.Error(), "elasticsearch.ca_file") {
			t.Errorf("ca_file %s: %v, want an elasticsearch.ca_file error", bad, err)
		}
	}
}

// TestElasticsearchExecutor_badServer checks answers that are not
// Elasticsearch's: a server without the product header, a response that
// leaves out a document.
func TestElasticsearchExecutor_badServer(t *testing.T) {
	t.Parallel()
	notES := newFakeElasticsearch(t)
	notES.noProduct = true
	e := newTestElasticsearchExecutor(t, notES.URL, nil)
	err := e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 1}`)))
	if err == nil || !strings.Contains(err.Error(), "not Elasticsearch") {
		t.Errorf("Execute against a server without X-Elastic-Product: %v", err)
	}

	short := newFakeElasticsearch(t)
	short.dropItem = true
	e = newTestElasticsearchExecutor(t, short.URL, nil)
	err = e.Execute(t.Context(), testAction(IDElasticsearch, payload(t, `{"index": "i", "data": 1}`)))
	if err == nil || !Retriable(err) || !strings.Contains(err.Error(), "0 results for 1 documents") {
		t.Errorf("Execute with a result missing: %v, want retriable", err)
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

// BenchmarkElasticsearch measures elasticsearch actions through the
// registry against fakeElasticsearch on loopback (its NDJSON parsing shares
// the CPU), with a 300-byte document: one action at a time, and 128
// concurrent actions.
func BenchmarkElasticsearch(b *testing.B) {
	doc := decodeJSON(b, benchEvent)
	for _, bc := range []struct {
		name       string
		interval   time.Duration
		wait       bool
		concurrent bool
	}{
		{"default/1", 100 * time.Millisecond, false, false},
		{"default/128", 100 * time.Millisecond, false, true},
		{"wait_for_batch 100ms/1", 100 * time.Millisecond, true, false},
		{"wait_for_batch 100ms/128", 100 * time.Millisecond, true, true},
		{"wait_for_batch 10ms/128", 10 * time.Millisecond, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			es := newFakeElasticsearch(b)
			cfg := testConfig()
			cfg.Elasticsearch.DefaultEndpoint = es.URL
			cfg.Elasticsearch.FlushInterval = Duration(bc.interval)
			cfg.Elasticsearch.WaitForBatch = bc.wait
			r, _ := newTestRegistry(b, cfg, Deps{})
			a := tree.Action{ID: IDElasticsearch, Payload: map[string]any{"index": "events", "data": doc}}
			b.ReportAllocs()
			if bc.concurrent {
				b.SetParallelism(64) // × GOMAXPROCS 2
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := r.Run(b.Context(), a); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for b.Loop() {
					if err := r.Run(b.Context(), a); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(float64(b.N)/float64(len(es.received())), "docs/request")
		})
	}
}

// TestElasticsearchExecutor_documentIsOneLine checks a document with
// newlines: the NDJSON of _bulk relies on encoding/json never writing a raw
// newline.
func TestElasticsearchExecutor_documentIsOneLine(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, es.URL, nil)
	text := "line 1\nline 2\r\n\u2028"
	p := map[string]any{"index": "i", "data": map[string]any{"text": text}}
	if err := e.Execute(t.Context(), testAction(IDElasticsearch, p)); err != nil {
		t.Fatal(err)
	}
	got := es.documents("i")
	if len(got) != 1 || strings.ContainsAny(got[0], "\r\n") {
		t.Fatalf("index holds %q", got)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(got[0]), &back); err != nil || back["text"] != text {
		t.Errorf("document %q decodes to %v (%v)", got[0], back, err)
	}
}

// TestElasticsearchExecutor_flushInterval checks that with wait_for_batch a
// lone document is sent by the flush_interval timer.
func TestElasticsearchExecutor_flushInterval(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.WaitForBatch = true
		c.FlushInterval = Duration(20 * time.Millisecond)
	})
	for i := range 3 {
		if err := e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": i})); err != nil {
			t.Fatal(err)
		}
	}
	if reqs := es.received(); len(reqs) != 3 {
		t.Errorf("requests %+v, want 3 of one document", reqs)
	}
}

// TestElasticsearchExecutor_largeDocument checks flush_bytes: a document of
// flush_bytes or more goes alone, after the documents buffered before it.
func TestElasticsearchExecutor_largeDocument(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.Workers = 1
		c.WaitForBatch = true
		c.FlushInterval = Duration(time.Hour)
		c.FlushBytes = 200
	})
	small := make(chan error, 2)
	for i := range 2 {
		go func() {
			small <- e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": i}))
		}()
	}
	waitAdded(t, e, 2)
	big := map[string]any{"index": "i", "data": strings.Repeat("x", 300)}
	if err := e.Execute(t.Context(), testAction(IDElasticsearch, big)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-small; err != nil {
			t.Fatal(err)
		}
	}
	reqs := es.received()
	if len(reqs) != 2 || reqs[0].docs+reqs[1].docs != 3 || (reqs[0].docs != 1 && reqs[1].docs != 1) {
		t.Errorf("requests %+v, want the large document alone and the 2 small ones together", reqs)
	}
}

// TestElasticsearchExecutor_workers checks that elasticsearch.workers bounds
// the _bulk requests in flight per endpoint.
func TestElasticsearchExecutor_workers(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	es.release = make(chan struct{})
	const workers, n = 2, 6
	e := newTestElasticsearchExecutor(t, es.URL, func(c *ElasticsearchConfig) {
		c.Workers = workers
		c.WaitForBatch = true
		c.FlushInterval = Duration(time.Hour)
		c.FlushBytes = 1 // every document goes alone, at once
	})
	results := make(chan error, n)
	for i := range n {
		go func() {
			results <- e.Execute(t.Context(), testAction(IDElasticsearch, map[string]any{"index": "i", "data": i}))
		}()
	}
	waitAdded(t, e, n)
	active := func() int {
		es.mu.Lock()
		defer es.mu.Unlock()
		return es.active
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for active() < workers {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight, want %d", active(), workers)
		}
		<-tick.C
	}
	for range n {
		es.release <- struct{}{}
	}
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	es.mu.Lock()
	peak := es.maxActive
	es.mu.Unlock()
	if peak != workers {
		t.Errorf("up to %d requests in flight, want %d (workers)", peak, workers)
	}
	if reqs := es.received(); len(reqs) != n {
		t.Errorf("%d requests, want %d", len(reqs), n)
	}
}
