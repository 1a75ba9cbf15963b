// Package tracingtest builds tracer providers for tests and benchmarks.
package tracingtest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Dropping returns a tracer provider that samples with sampler into a
// batch processor whose exporter drops the spans: the SDK's cost without
// the export's network. It is shut down at the end of tb. A nil sampler
// returns a nil provider: tracing off, as without an OTLP endpoint.
func Dropping(tb testing.TB, sampler sdktrace.Sampler) trace.TracerProvider {
	if sampler == nil {
		return nil
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sampler))
	tb.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// Attr returns the value of the attribute key of a recorded span, as a
// string; "" when it has none.
func Attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
