package action

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/jsonvalue"
)

// conformanceCase describes one executor for the shared suite that every
// executor passes (litestream's RunWithReplicaClient style).
type conformanceCase struct {
	name string
	// setup returns the executor under test and a valid payload for it.
	setup func(t *testing.T) (Executor, map[string]any)
	// invalid are payloads the executor must refuse with a permanent error
	// wrapping ErrInvalidPayload.
	invalid []map[string]any
	// honorsCancel tells that the executor does I/O and fails on a
	// canceled context.
	honorsCancel bool
}

func TestConformance(t *testing.T) {
	for _, c := range conformanceCases(t) {
		t.Run(c.name, func(t *testing.T) { runConformance(t, c) })
	}
}

func runConformance(t *testing.T, c conformanceCase) {
	t.Run("valid action succeeds and leaves the payload alone", func(t *testing.T) {
		ex, p := c.setup(t)
		before := jsonvalue.Clone(p)
		if err := ex.Execute(t.Context(), tree.Action{ID: c.name, Payload: p, CreatedMs: 1}); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if !reflect.DeepEqual(before, any(p)) {
			t.Fatalf("payload modified:\nbefore %v\nafter  %v", before, p)
		}
	})

	t.Run("invalid payloads fail permanently", func(t *testing.T) {
		ex, _ := c.setup(t)
		for _, p := range c.invalid {
			before := jsonvalue.Clone(p)
			err := ex.Execute(t.Context(), tree.Action{ID: c.name, Payload: p})
			if !errors.Is(err, ErrInvalidPayload) {
				t.Errorf("payload %v: error %v, want ErrInvalidPayload", p, err)
			}
			var classified *Error
			if !errors.As(err, &classified) || Retriable(err) {
				t.Errorf("payload %v: error %v is not classified permanent", p, err)
			}
			if !reflect.DeepEqual(before, any(p)) {
				t.Errorf("payload modified: %v", p)
			}
		}
	})

	t.Run("nil payload does not panic", func(t *testing.T) {
		ex, _ := c.setup(t)
		err := ex.Execute(t.Context(), tree.Action{ID: c.name})
		var classified *Error
		if err != nil && !errors.As(err, &classified) {
			t.Fatalf("unclassified error %v", err)
		}
	})

	t.Run("concurrent executions", func(t *testing.T) {
		ex, p := c.setup(t)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for range 4 {
			wg.Go(func() {
				for range 10 {
					errs <- ex.Execute(t.Context(), tree.Action{ID: c.name, Payload: p})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
		}
	})

	if c.honorsCancel {
		t.Run("canceled context fails", func(t *testing.T) {
			ex, p := c.setup(t)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			err := ex.Execute(ctx, tree.Action{ID: c.name, Payload: p})
			var classified *Error
			if err == nil || !errors.As(err, &classified) {
				t.Fatalf("error %v, want a classified error", err)
			}
		})
	}
}

func conformanceCases(t *testing.T) []conformanceCase {
	return []conformanceCase{
		{
			name: IDLogger,
			setup: func(t *testing.T) (Executor, map[string]any) {
				log, _ := newTestLogger()
				return &loggerExecutor{log: log}, payload(t, `{"a": [1, {"b": null}], "c": "${item}"}`)
			},
		},
		{
			name: IDArchive,
			setup: func(t *testing.T) (Executor, map[string]any) {
				cfg := Default().Archive
				cfg.BasePath = t.TempDir()
				cfg.DefaultPath = "/default/file.out"
				cfg.Paths = map[string]string{"one": "/one/${key}/file.log"}
				a, err := newArchiveExecutor(cfg, discardLogger())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Close() })
				return a, payload(t, `{"event": {"type": "t", "n": 1.50}, "archive_type": "one", "key": "k"}`)
			},
			invalid: []map[string]any{
				{},
				{"event": nil, "archive_type": "nope"},
				{"event": 1, "archive_type": "one"},
				{"event": 1, "archive_type": "one", "key": 3},
			},
			honorsCancel: true,
		},
		{
			name: IDScript,
			setup: func(t *testing.T) (Executor, map[string]any) {
				dir := t.TempDir()
				writeScript(t, dir, "ok.sh", "exit 0\n")
				cfg := Default().Script
				cfg.AllowedDir = dir
				return newScriptExecutor(cfg, discardLogger()), payload(t, `{"script": "ok.sh -v", "args": ["a", {"b": 1}]}`)
			},
			invalid: []map[string]any{
				{},
				{"script": 3},
				{"script": " \t"},
			},
			honorsCancel: true,
		},
		{
			name: IDHTTP,
			setup: func(t *testing.T) (Executor, map[string]any) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
				t.Cleanup(srv.Close)
				h := newHTTPExecutor(testConfig().HTTP, nil)
				t.Cleanup(func() { _ = h.Close() })
				return h, map[string]any{"url": srv.URL + "/hook", "headers": map[string]any{"X-A": "b"}, "n": 1}
			},
			invalid: []map[string]any{
				{},
				{"url": 3},
				{"url": "ftp://example.com/x"},
				{"url": "http:///nohost"},
				{"url": "http://[::1"},
				{"url": "http://example.com", "method": "TRACE"},
				{"url": "http://example.com", "method": 1},
				{"url": "http://example.com", "headers": "x"},
				{"url": "http://example.com", "headers": map[string]any{"X-A": 1}},
				{"url": "http://example.com", "headers": map[string]any{"Bad Name": "x"}},
				{"url": "http://example.com", "headers": map[string]any{"X-A": "a\r\nX-B: b"}},
				{"url": "http://example.com", "method": "GET", "body": "x"},
			},
			honorsCancel: true,
		},
		{
			name: IDForeach,
			setup: func(t *testing.T) (Executor, map[string]any) {
				r, _ := newTestRegistry(t, testConfig(), Deps{Executors: map[string]Executor{"inner": &recorder{}}})
				return r.entries[IDForeach].ex, payload(t, `{"target": [1, {"a": "x"}],
					"actions": [{"id": "inner", "payload": {"v": "${item}", "w": ["${item.a}"]}}]}`)
			},
			invalid: []map[string]any{
				{},
				{"target": 1, "actions": []any{}},
				{"target": []any{}, "actions": "x"},
			},
			honorsCancel: true,
		},
		{
			name: IDKafka,
			setup: func(t *testing.T) (Executor, map[string]any) {
				p := ProducerFunc(func(ctx context.Context, _ string, _, _ []byte, _ []Header) error { return ctx.Err() })
				return &kafkaExecutor{p: p, def: "out", allowed: []string{"alerts"}},
					payload(t, `{"topic": "alerts", "key": "k", "value": {"a": [1, null]}}`)
			},
			invalid: []map[string]any{
				{"topic": 3},
				{"topic": ""},
				{"topic": "elsewhere"},
				{"key": 1},
			},
			honorsCancel: true,
		},
		{
			name: IDFinding,
			setup: func(t *testing.T) (Executor, map[string]any) {
				f := newTestFindingExecutor(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write([]byte(`{"uid": "u"}`))
				}))
				return f, payload(t, `{"monitored_domain_id": 7, "tool_code": "leakmon", "resource_url": "https://paste.example/1",
					"username": "bob@acme.example", "password": "hunter2"}`)
			},
			invalid: []map[string]any{
				{},
				{"monitored_domain_id": "7"},
				{"monitored_domain_id": 1.5},
				{"monitored_domain_id": 7, "username": 3},
				{"monitored_domain_id": 7, "extra": "x"},
			},
			honorsCancel: true,
		},
		{
			name: IDElasticsearch,
			setup: func(t *testing.T) (Executor, map[string]any) {
				es := newFakeElasticsearch(t)
				return newTestElasticsearchExecutor(t, es.URL, nil), payload(t, `{"index": "logs-1", "data": {"a": 1}}`)
			},
			invalid: []map[string]any{
				{},
				{"index": "i"},
				{"index": 3, "data": 1},
				{"index": "a\x00b", "data": 1},
				{"index": "a\xffb", "data": 1},
				{"index": "i", "data": 1, "endpoint": 3},
				{"index": "i", "data": 1, "endpoint": "http://elsewhere:9200"},
				{"index": "i", "data": 1, "auth": map[string]any{"type": "PemCertificatePath"}},
			},
			honorsCancel: true,
		},
	}
}
