package satellite

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/internal/tracingtest"
	"github.com/squallhq/squall/satellite/intake"
)

// spanByName returns the ended span named name, failing the test if
// there is none.
func spanByName(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(exp.GetSpans()))
	return tracetest.SpanStub{}
}

// TestSatellite_Tracing follows a webhook call through the intake's server
// span and the producer span, to the event's traceparent header, directly
// to Kafka and through the spool.
func TestSatellite_Tracing(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1, DataDir: t.TempDir()})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	cfg := testConfig(t, b.Addr, hooks, "")
	cfg.TracerProvider = tp
	s := start(t, cfg)

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	status, id := s.post(t, "plain", "tok-0123456789abc", `{"a": 1}`, http.Header{"Traceparent": {caller}, "Tracestate": {"k=v"}})
	if status != 200 {
		t.Fatalf("post: %d %s", status, id)
	}
	server := spanByName(t, exp, "POST "+intake.Pattern)
	send := spanByName(t, exp, "send "+topic)
	if server.SpanKind != trace.SpanKindServer || server.Parent.SpanID().String() != "00f067aa0ba902b7" ||
		server.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span: kind %v, parent %v, trace %v", server.SpanKind, server.Parent.SpanID(), server.SpanContext.TraceID())
	}
	if tracingtest.Attr(server, "squall.event.id") != id || tracingtest.Attr(server, "http.response.status_code") != "200" || tracingtest.Attr(server, "squall.webhook.id") != "plain" {
		t.Errorf("server span attributes %v", server.Attributes)
	}
	if send.SpanKind != trace.SpanKindProducer || send.Parent.SpanID() != server.SpanContext.SpanID() || tracingtest.Attr(send, "squall.path") != "kafka" {
		t.Errorf("producer span: kind %v, parent %v (server %v), path %q", send.SpanKind, send.Parent.SpanID(), server.SpanContext.SpanID(), tracingtest.Attr(send, "squall.path"))
	}
	recs := b.Records(t, topic)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + send.SpanContext.SpanID().String() + "-01"
	if got, _ := recs[0].Header(intake.HeaderTraceparent); got != want {
		t.Errorf("record traceparent %s, want the producer span's %s", got, want)
	}
	if got, _ := recs[0].Header(intake.HeaderTracestate); got != "k=v" {
		t.Errorf("record tracestate %q, want the caller's", got)
	}

	// Kafka away: the event is spooled under the producer span, and the
	// drain links back to it.
	exp.Reset()
	b.Stop()
	status, id = s.post(t, "plain", "tok-0123456789abc", `{"a": 2}`, nil)
	if status != 200 {
		t.Fatalf("post while Kafka is away: %d %s", status, id)
	}
	send = spanByName(t, exp, "send "+topic)
	appendSpan := spanByName(t, exp, "spool append")
	if tracingtest.Attr(send, "squall.path") != "spool" || appendSpan.Parent.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("spooled: path %q, spool append parent %v, producer %v", tracingtest.Attr(send, "squall.path"), appendSpan.Parent.SpanID(), send.SpanContext.SpanID())
	}
	if server := spanByName(t, exp, "POST "+intake.Pattern); server.Parent.IsValid() || send.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("a call without traceparent: server span parent %v; producer parent %v", server.Parent, send.Parent.SpanID())
	}
	b.Restart()
	// The drain's span ends after the spool's commit: wait for the span.
	polltest.Wait(t, "the drain's span", 30*time.Second, func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "send "+topic+" (spool)" {
				return true
			}
		}
		return false
	})
	drain := spanByName(t, exp, "send "+topic+" (spool)")
	if len(drain.Links) != 1 || drain.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() || drain.Parent.IsValid() {
		t.Errorf("drain span: links %v, parent %v; want a root linked to %v", drain.Links, drain.Parent, send.SpanContext.SpanID())
	}
	recs = b.Records(t, topic)
	if got, _ := recs[len(recs)-1].Header(intake.HeaderTraceparent); !strings.Contains(got, send.SpanContext.SpanID().String()) {
		t.Errorf("spooled record traceparent %s, want the producer span %s", got, send.SpanContext.SpanID())
	}
}
