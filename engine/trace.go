package engine

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/tracing"
)

// HeaderTraceparent and HeaderTracestate are the Kafka headers carrying
// the event's W3C trace context, set by the intake that accepted it.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Span attribute keys (OpenTelemetry semantic conventions, and squall.*).
const (
	attrMessagingSystem = "messaging.system"
	attrDestination     = "messaging.destination.name"
	attrOperationType   = "messaging.operation.type"
	attrConsumerGroup   = "messaging.consumer.group.name"
	attrPartition       = "messaging.destination.partition.id"
	attrOffset          = "messaging.kafka.offset"
	attrEventID         = "squall.event.id"
	attrDuplicate       = "squall.duplicate"
	attrTreeIndex       = "squall.tree.index"
	attrRulesMatched    = "squall.rules.matched"
	attrActions         = "squall.actions"
)

// startSpan starts the consumer span of an event: the child of the span
// its traceparent header names (the satellite's send span).
func (s *Service) startSpan(ctx context.Context, m *kafkasource.Message, id []byte) (context.Context, trace.Span) {
	tp, _ := m.Header(HeaderTraceparent)
	ts, _ := m.Header(HeaderTracestate)
	ctx = tracing.ContextFromHeaders(ctx, tp, ts)
	ctx, span := s.tracer.Start(ctx, s.processSpan, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		// Only a sampled span costs its attributes.
		span.SetAttributes(
			attribute.String(attrMessagingSystem, "kafka"), attribute.String(attrDestination, m.Topic()),
			attribute.String(attrOperationType, "process"), attribute.String(attrConsumerGroup, s.cfg.Group),
			attribute.String(attrPartition, strconv.Itoa(m.Partition())), attribute.Int64(attrOffset, m.Offset()),
			attribute.String(attrEventID, string(id)))
	}
	return ctx, span
}

// evaluate evaluates the event against the tree under a span that names
// the matched rules; it appends the actions to dst.
func (s *Service) evaluate(ctx context.Context, tv *treeVersion, cnt *tree.Counters, nowMs int64, ev *tree.Event, dst []tree.Action) []tree.Action {
	if !trace.SpanFromContext(ctx).IsRecording() {
		// The event's span is not sampled: neither is this one.
		return cnt.Actions(ev, dst, nowMs)
	}
	_, span := s.tracer.Start(ctx, "evaluate tree")
	defer span.End()
	actions, rules := cnt.MatchedActions(ev, dst, nil, nowMs)
	span.SetAttributes(attribute.Int64(attrTreeIndex, int64(tv.index)), attribute.StringSlice(attrRulesMatched, rules),
		attribute.Int(attrActions, len(actions)))
	for _, r := range rules {
		span.AddEvent("rule matched", trace.WithAttributes(attribute.String("squall.rule", r)))
	}
	return actions
}

// traceIDOf returns the trace id of a W3C traceparent value
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"), and false
// when the value is not one or its trace id is invalid (all zeros).
func traceIDOf(tp []byte) (string, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || (len(tp) > 55 && tp[55] != '-') {
		return "", false
	}
	// Version ff is invalid; version 00 has exactly 55 bytes; later
	// versions may append fields after a dash.
	if string(tp[:2]) == "ff" || (string(tp[:2]) == "00" && len(tp) != 55) {
		return "", false
	}
	id := tp[3:35]
	zero := true
	for _, c := range id {
		switch {
		case c == '0':
		case '1' <= c && c <= '9', 'a' <= c && c <= 'f':
			zero = false
		default:
			return "", false
		}
	}
	if zero {
		return "", false
	}
	return string(id), true
}
