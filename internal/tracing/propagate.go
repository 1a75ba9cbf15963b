package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxTracestateLen bounds an incoming tracestate: a longer one is dropped
// (W3C Trace Context asks to propagate at least 512 characters).
const MaxTracestateLen = 512

// Header names of the W3C trace context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Tracer returns the tracer of a component from tp, or nil when tp is nil
// (tracing off). Components keep the tracer and start spans only when it
// is not nil.
func Tracer(tp trace.TracerProvider, component string) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer("github.com/squallhq/squall/" + component)
}

const hexDigits = "0123456789abcdef"

// AppendTraceparent appends the W3C traceparent (version 00) of sc.
func AppendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, "00-"...)
	for _, c := range tid {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	b = append(b, '-')
	for _, c := range sid {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	f := byte(sc.TraceFlags())
	return append(b, '-', hexDigits[f>>4&0xf], hexDigits[f&0xf])
}

// ContextFromHeaders returns ctx with the remote span context of a
// record's traceparent and tracestate header values as its parent; ctx
// unchanged when the traceparent is not valid.
func ContextFromHeaders(ctx context.Context, traceparent, tracestate []byte) context.Context {
	if len(traceparent) == 0 {
		return ctx
	}
	c := headerCarrier{traceparent: string(traceparent), tracestate: string(tracestate)}
	return propagation.TraceContext{}.Extract(ctx, &c)
}

// Inject sets the traceparent (and tracestate) of ctx's span on the
// headers of an outgoing request; it does nothing when ctx has no valid
// span.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// Getter gives the first value of a request's header field (any case), or
// ""; [http.Header] is one, and so is a view of another HTTP server's
// request.
type Getter interface {
	Get(name string) string
}

// Extract returns ctx with the span context of an incoming request's
// headers as the remote parent, if they carry a valid one. A tracestate
// longer than MaxTracestateLen is dropped (the traceparent still counts).
// Call it only for callers whose trace context may decide the sampling
// and the trace id: authenticated or trusted ones.
func Extract(ctx context.Context, h Getter) context.Context {
	if h.Get(HeaderTraceparent) == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, getterCarrier{h})
}

// getterCarrier reads the trace context of a Getter, a tracestate only up
// to MaxTracestateLen; it sets nothing.
type getterCarrier struct{ h Getter }

var _ propagation.TextMapCarrier = getterCarrier{}

func (c getterCarrier) Get(key string) string {
	v := c.h.Get(key)
	if len(v) > MaxTracestateLen && strings.EqualFold(key, HeaderTracestate) {
		return ""
	}
	return v
}

func (getterCarrier) Set(string, string) {}
func (getterCarrier) Keys() []string     { return []string{HeaderTraceparent, HeaderTracestate} }

// headerCarrier carries the two trace context values of a Kafka record.
type headerCarrier struct{ traceparent, tracestate string }

var _ propagation.TextMapCarrier = (*headerCarrier)(nil)

func (c *headerCarrier) Get(key string) string {
	switch key {
	case HeaderTraceparent:
		return c.traceparent
	case HeaderTracestate:
		return c.tracestate
	}
	return ""
}

func (c *headerCarrier) Set(key, value string) {
	switch key {
	case HeaderTraceparent:
		c.traceparent = value
	case HeaderTracestate:
		c.tracestate = value
	}
}

func (c *headerCarrier) Keys() []string { return []string{HeaderTraceparent, HeaderTracestate} }
