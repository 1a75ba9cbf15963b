package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of the active span's ids.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// LogHandler wraps a slog handler: a record logged with a context that
// holds a valid span context (a span of this process, or the remote parent
// of an event) gets its trace_id and span_id, in lower-case hex. Log with
// the *Context methods (InfoContext, LogAttrs) for it to see the span.
type LogHandler struct{ next slog.Handler }

var _ slog.Handler = LogHandler{}

// NewLogHandler returns a LogHandler around next.
func NewLogHandler(next slog.Handler) LogHandler { return LogHandler{next: next} }

// Enabled implements slog.Handler.
func (h LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return LogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(name string) slog.Handler {
	return LogHandler{next: h.next.WithGroup(name)}
}
