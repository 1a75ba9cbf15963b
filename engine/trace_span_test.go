package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/internal/tracingtest"
)

// TestService_Tracing follows events through the engine's spans: the
// consumer span as the child of the record's traceparent, the evaluation
// naming the matched rules, a span per action, and the http action's
// traceparent at its target. The logs of an event carry its trace.
func TestService_Tracing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	e.deploy("v1")
	cfg := e.config()
	cfg.TracerProvider = tp
	r := start(t, cfg)

	ev := orders(1, 1)[0]
	e.produce(ev)
	polltest.Wait(t, "the http action", 20*time.Second, func() bool { return len(e.receiver.Calls()) == 1 })
	spans := func() map[string]tracetest.SpanStub {
		m := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			m[s.Name] = s
		}
		return m
	}
	var got map[string]tracetest.SpanStub
	polltest.Wait(t, "the consumer span", 10*time.Second, func() bool {
		got = spans()
		_, ok := got["process "+testTopic]
		return ok
	})
	process := got["process "+testTopic]
	if process.SpanKind != trace.SpanKindConsumer || process.Parent.SpanID().String() != "00f067aa0ba902b7" ||
		process.SpanContext.TraceID().String() != testTraceID || !process.Parent.IsRemote() {
		t.Errorf("consumer span: kind %v, parent %v", process.SpanKind, process.Parent)
	}
	eval := got["evaluate tree"]
	if eval.Parent.SpanID() != process.SpanContext.SpanID() || tracingtest.Attr(eval, attrRulesMatched) != `["all/orders"]` || tracingtest.Attr(eval, attrActions) != "2" {
		t.Errorf("evaluation span: parent %v, attributes %v", eval.Parent.SpanID(), eval.Attributes)
	}
	for name, kind := range map[string]trace.SpanKind{"action archive": trace.SpanKindInternal, "action http": trace.SpanKindClient} {
		s, ok := got[name]
		if !ok || s.Parent.SpanID() != process.SpanContext.SpanID() || s.SpanKind != kind {
			t.Errorf("span %q: found %v, parent %v, kind %v", name, ok, s.Parent.SpanID(), s.SpanKind)
		}
	}
	httpSpan := got["action http"]
	if tracingtest.Attr(httpSpan, "http.response.status_code") != "200" || !strings.HasPrefix(tracingtest.Attr(httpSpan, "url.full"), e.receiver.URL) {
		t.Errorf("http span attributes %v", httpSpan.Attributes)
	}
	want := "00-" + testTraceID + "-" + httpSpan.SpanContext.SpanID().String() + "-01"
	if tp := e.receiver.Calls()[0].Traceparent; tp != want {
		t.Errorf("the http target got traceparent %q, want the action span's %q", tp, want)
	}

	// A failing action: its span and the event's are errors, the retry
	// is an event, and the logs carry the trace.
	exp.Reset()
	e.produce(event{id: "flaky-1", tenant: "t", typ: "flaky"})
	polltest.Wait(t, "the dead-lettered event", 20*time.Second, func() bool { return r.counter("squall_engine_dlq_messages_total") == 1 })
	polltest.Wait(t, "the consumer span of the failed event", 10*time.Second, func() bool {
		got = spans()
		_, ok := got["process "+testTopic]
		return ok
	})
	if s := got["action http"]; s.Status.Code.String() != "Error" || !slices.ContainsFunc(s.Events, func(e sdktrace.Event) bool { return e.Name == "retry" }) {
		t.Errorf("failed http action span: status %v, events %v", s.Status, s.Events)
	}
	if s := got["process "+testTopic]; s.Status.Code.String() != "Error" {
		t.Errorf("failed event's span: status %v", s.Status)
	}
	for _, msg := range []string{`msg="action failed, retrying"`, `msg="event dead-lettered"`} {
		found := false
		for _, line := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(line, msg) {
				found = true
				if !strings.Contains(line, "trace_id="+testTraceID) || !strings.Contains(line, "span_id=") {
					t.Errorf("log line without the trace: %s", line)
				}
			}
		}
		if !found {
			t.Errorf("no log line %s", msg)
		}
	}
}
