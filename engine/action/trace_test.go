package action

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/tracingtest"
)

// headerRecorder answers 201 and records the traceparent of every request.
type headerRecorder struct {
	mu           sync.Mutex
	traceparents []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.traceparents = append(h.traceparents, r.Header.Get("Traceparent"))
	h.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (h *headerRecorder) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.traceparents...)
}

// TestRegistry_tracing runs the actions that call a server under a parent
// span: each gets a client span, child of the parent, and its target
// receives the traceparent of the span that sent the request.
func TestRegistry_tracing(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })

	var httpTarget, findingTarget headerRecorder
	httpSrv := httptest.NewServer(&httpTarget)
	t.Cleanup(httpSrv.Close)
	findingSrv := httptest.NewServer(&findingTarget)
	t.Cleanup(findingSrv.Close)
	es := newFakeElasticsearch(t)
	tok := filetest.Write(t, t.TempDir(), "token", "tok")
	cfg := testConfig()
	cfg.Finding.MasterURLs, cfg.Finding.TokenFile = []string{findingSrv.URL}, tok
	cfg.Elasticsearch.DefaultEndpoint = es.URL
	r, _ := newTestRegistry(t, cfg, Deps{TracerProvider: tp})

	ctx, parent := tp.Tracer("test").Start(t.Context(), "process")
	for _, a := range []struct {
		id, payload string
	}{
		{IDHTTP, `{"url": "` + httpSrv.URL + `/hook?secret=x", "a": 1}`},
		{IDFinding, `{"monitored_domain_id": 1, "username": "u", "password": "p"}`},
		{IDElasticsearch, `{"index": "i", "data": {"a": 1}}`},
		{IDLogger, `{"a": 1}`},
	} {
		if err := r.Run(ctx, testAction(a.id, payload(t, a.payload))); err != nil {
			t.Fatalf("%s: %v", a.id, err)
		}
	}
	parent.End()

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	traceparent := func(s tracetest.SpanStub) string {
		return "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
	}
	for id, kind := range map[string]trace.SpanKind{IDHTTP: trace.SpanKindClient, IDFinding: trace.SpanKindClient,
		IDElasticsearch: trace.SpanKindClient, IDLogger: trace.SpanKindInternal} {
		s, ok := spans["action "+id]
		if !ok || s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanKind != kind {
			t.Errorf("action %s: span found %v, parent %v, kind %v", id, ok, s.Parent.SpanID(), s.SpanKind)
		}
	}
	if got := httpTarget.got(); len(got) != 1 || got[0] != traceparent(spans["action http"]) {
		t.Errorf("http target got traceparent %q, want %s", got, traceparent(spans["action http"]))
	}
	if u := tracingtest.Attr(spans["action http"], attrURL); u != httpSrv.URL+"/hook" {
		t.Errorf("http span url.full %q: want it without the query", u)
	}
	if got := findingTarget.got(); len(got) != 1 || got[0] != traceparent(spans["action finding"]) {
		t.Errorf("finding target got traceparent %q, want %s", got, traceparent(spans["action finding"]))
	}
	bulk, ok := spans["elasticsearch _bulk"]
	if !ok || bulk.Parent.SpanID() != spans["action elasticsearch"].SpanContext.SpanID() || bulk.SpanKind != trace.SpanKindClient {
		t.Fatalf("_bulk span found %v, parent %v", ok, bulk.Parent.SpanID())
	}
	if got := es.received(); len(got) != 1 || got[0].traceparent != traceparent(bulk) {
		t.Errorf("Elasticsearch got %+v, want traceparent %s", got, traceparent(bulk))
	}
}

// TestRegistry_tracingOff checks that without a tracer provider no
// traceparent is sent.
func TestRegistry_tracingOff(t *testing.T) {
	t.Parallel()
	var target headerRecorder
	srv := httptest.NewServer(&target)
	t.Cleanup(srv.Close)
	r, _ := newTestRegistry(t, testConfig(), Deps{})
	if err := r.Run(t.Context(), testAction(IDHTTP, payload(t, `{"url": "`+srv.URL+`"}`))); err != nil {
		t.Fatal(err)
	}
	if got := target.got(); len(got) != 1 || got[0] != "" {
		t.Errorf("traceparent %q with tracing off", got)
	}
}
