package intake

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
)

// randomLen is the random bytes one event needs: 8 for its id, 16 for a
// new trace id and 8 for a new span id.
const randomLen = 8 + 16 + 8

const hexDigits = "0123456789abcdef"

// eventIDs makes UUIDv7 event ids (RFC 9562): a 48-bit Unix time in
// milliseconds, then 12 bits of sub-millisecond time in steps of 256 ns,
// raised when needed so that the ids of one intake always increase, then 62
// random bits.
type eventIDs struct {
	last atomic.Int64 // the last time part: milliseconds<<12 | sub-millisecond step
}

// appendNew appends a new event id for time now, with its random bits from
// random (8 bytes).
func (g *eventIDs) appendNew(b []byte, now time.Time, random []byte) []byte {
	nano := now.UnixNano()
	milli := nano / int64(time.Millisecond)
	want := milli<<12 | (nano-milli*int64(time.Millisecond))>>8
	var t int64
	for {
		last := g.last.Load()
		t = max(want, last+1)
		if g.last.CompareAndSwap(last, t) {
			break
		}
	}
	var u [16]byte
	ms := uint64(t >> 12)
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70 | byte(t>>8)&0x0f // version 7
	u[7] = byte(t)
	copy(u[8:], random[:8])
	u[8] = u[8]&0x3f | 0x80 // variant 10
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// appendTraceparent appends the W3C traceparent of an event: the request's
// when it is valid, else a new trace with the random ids in random (24
// bytes), sampled. It also returns the request's tracestate when its
// traceparent is kept and the tracestate is valid and at most
// tracing.MaxTracestateLen bytes. It serves when tracing
// is off: the intake records no span of its own, so the caller's span stays
// the parent of whatever processes the event.
func appendTraceparent(b []byte, h headers, random []byte) ([]byte, string) {
	if v := h.Get("Traceparent"); v != "" {
		if tid, sid, flags, ok := parseTraceparent(v); ok {
			b = append(b, "00-"...)
			b = append(b, tid...)
			b = append(b, '-')
			b = append(b, sid...)
			b = append(b, '-', '0', hexDigits[flags])
			var tracestate string
			if ts := h.Get("Tracestate"); ts != "" && len(ts) <= tracing.MaxTracestateLen {
				// A tracestate that does not parse is dropped, and
				// does not affect the traceparent (W3C Trace Context).
				state, _ := trace.ParseTraceState(ts)
				tracestate = state.String()
			}
			return b, tracestate
		}
	}
	b = append(b, "00-"...)
	for _, c := range random[:16] {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	b = append(b, '-')
	for _, c := range random[16:24] {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	// W3C version 00: only the sampled (01) and random (02) flags are
	// defined.
	return append(b, "-03"...), ""
}

// parseTraceparent parses a traceparent header as OpenTelemetry's W3C
// propagator does: a version other than ff, a trace id and a span id in
// lower-case hex and not all zeros, and the flags; version 00 allows
// neither more fields nor flags above 03. It returns the ids as written and
// the flags the intake keeps (sampled and random).
func parseTraceparent(h string) (traceID, spanID string, flags byte, ok bool) {
	version, h, _ := strings.Cut(h, "-")
	traceID, h, _ = strings.Cut(h, "-")
	spanID, h, _ = strings.Cut(h, "-")
	f, h, _ := strings.Cut(h, "-")
	if !lowerHex(version, 2) || version == "ff" || !lowerHex(traceID, 32) || !lowerHex(spanID, 16) ||
		!lowerHex(f, 2) || allZeros(traceID) || allZeros(spanID) {
		return "", "", 0, false
	}
	flags = hexValue(f[0])<<4 | hexValue(f[1])
	if version == "00" && (h != "" || flags > 3) {
		return "", "", 0, false
	}
	return traceID, spanID, flags & 3, true
}

// lowerHex reports whether s is n lower-case hex digits.
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	return strings.Count(s, "0") == len(s)
}

// hexValue is the value of a lower-case hex digit.
func hexValue(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// Span attribute keys (OpenTelemetry semantic conventions, and squall.*).
const (
	attrHTTPMethod = "http.request.method"
	attrHTTPRoute  = "http.route"
	attrHTTPStatus = "http.response.status_code"
	attrErrorType  = "error.type"
	attrWebhook    = "squall.webhook.id"
	attrEventID    = "squall.event.id"
)

// spanName is the name of a webhook call's span: its method and route.
const spanName = "POST " + Pattern

// startSpan starts the server span of an authenticated webhook call, from
// start, the child of the caller's traceparent if it sent a valid one, and
// puts it in the call's context. It is called once the token and the
// signature verified: a caller that is not authenticated decides neither
// the sampling nor the trace id ([Intake.finish] starts its span without
// a parent).
func (in *Intake) startSpan(c *request, start time.Time) {
	if in.tracer == nil {
		return
	}
	ctx := tracing.Extract(c.ctx, c.header)
	// Attributes are set at the end, only on a recording span: a span
	// not sampled costs no attribute.
	c.ctx, c.span = in.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
}

// spanContext returns the span context of the call's span, or an invalid
// one when tracing is off (without looking at the call's context).
func (in *Intake) spanContext(ctx context.Context) trace.SpanContext {
	if in.tracer == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(ctx)
}
