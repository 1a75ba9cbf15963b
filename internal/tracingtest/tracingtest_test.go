package tracingtest

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
