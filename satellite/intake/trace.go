package intake

import (
	"context"
	"crypto/rand"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext returns the W3C trace context of an event: the request's
// traceparent (and tracestate) when it is valid, else a new trace with random
// ids, sampled. The intake records no span of its own, so the caller's span
// stays the parent of whatever processes the event.
func traceContext(ctx context.Context, h http.Header) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h)))
	if !sc.IsValid() {
		var cfg trace.SpanContextConfig
		rand.Read(cfg.TraceID[:])
		rand.Read(cfg.SpanID[:])
		cfg.TraceFlags = trace.FlagsSampled | trace.FlagsRandom
		sc = trace.NewSpanContext(cfg)
	}
	// W3C version 00: only the sampled and random flags are defined.
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom)
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags.String(), sc.TraceState().String()
}
