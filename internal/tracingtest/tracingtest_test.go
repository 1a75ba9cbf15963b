package tracingtest

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestDropping(t *testing.T) {
	t.Parallel()
	if tp := Dropping(t, nil); tp != nil {
		t.Errorf("no sampler: %v, want no provider", tp)
	}
	tp := Dropping(t, sdktrace.AlwaysSample())
	_, span := tp.Tracer("test").Start(t.Context(), "span")
	if !span.SpanContext().IsSampled() {
		t.Error("span not sampled")
	}
	span.End()
}

func TestAttr(t *testing.T) {
	t.Parallel()
	s := tracetest.SpanStub{Attributes: []attribute.KeyValue{attribute.String("a", "x"), attribute.Int("n", 3)}}
	for key, want := range map[string]string{"a": "x", "n": "3", "none": ""} {
		if got := Attr(s, key); got != want {
			t.Errorf("Attr(%s) = %q, want %q", key, got, want)
		}
	}
}
