package satellite

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
)

// Span attribute keys (OpenTelemetry semantic conventions, and squall.*).
const (
	attrMessagingSystem = "messaging.system"
	attrDestination     = "messaging.destination.name"
	attrOperationType   = "messaging.operation.type"
	attrBatchCount      = "messaging.batch.message_count"
	attrEventID         = "squall.event.id"
	// attrPath is where the event went: kafka or spool.
	attrPath = "squall.path"
)

// maxDrainLinks bounds the links of a drain span to the spans of its
// events.
const maxDrainLinks = 128

// setPath records on the send span of ctx where the event went.
func setPath(ctx context.Context, path string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(attrPath, path))
	}
}

// setTraceparent makes the traceparent header of msg name sc.
func setTraceparent(msg *kafkasink.Message, sc trace.SpanContext) {
	for i := range msg.Headers {
		if msg.Headers[i].Key == intake.HeaderTraceparent {
			msg.Headers[i].Value = tracing.AppendTraceparent(make([]byte, 0, 55), sc)
			return
		}
	}
}

// startDrainSpan starts the span of a write of spooled events: a new trace,
// linked to the producer spans of (up to maxDrainLinks of) its events,
// whose calls ended when the events were spooled.
func (f *forwarder) startDrainSpan(ctx context.Context, msgs []kafkasink.Message) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, min(len(msgs), maxDrainLinks))
	for _, m := range msgs {
		if len(links) == maxDrainLinks {
			break
		}
		for _, h := range m.Headers {
			if h.Key == intake.HeaderTraceparent {
				if sc := trace.SpanContextFromContext(tracing.ContextFromHeaders(ctx, h.Value, nil)); sc.IsValid() {
					links = append(links, trace.Link{SpanContext: sc})
				}
				break
			}
		}
	}
	return f.tracer.Start(ctx, "send "+f.cfg.topic+" (spool)", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(links...), trace.WithAttributes(attribute.String(attrMessagingSystem, "kafka"),
			attribute.String(attrDestination, f.cfg.topic), attribute.String(attrOperationType, "send"),
			attribute.Int(attrBatchCount, len(msgs)), attribute.String(attrPath, pathSpool)))
}
