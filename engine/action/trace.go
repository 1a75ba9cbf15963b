package action

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
)

// Span attribute keys (OpenTelemetry semantic conventions, and squall.*).
const (
	attrAction     = "squall.action"
	attrRetriable  = "squall.retriable"
	attrAttempt    = "squall.attempt"
	attrError      = "error.message"
	attrHTTPMethod = "http.request.method"
	attrHTTPStatus = "http.response.status_code"
	attrServer     = "server.address"
	attrURL        = "url.full"
	attrDBSystem   = "db.system.name"
	attrBatchCount = "db.operation.batch.size"
	attrESEndpoint = "squall.elasticsearch.endpoint"
)

// spanKind is the kind of an action's span: client for the actions that
// call a server, producer for kafka.
func spanKind(id string) trace.SpanKind {
	switch id {
	case IDHTTP, IDElasticsearch, IDFinding:
		return trace.SpanKindClient
	case IDKafka:
		return trace.SpanKindProducer
	}
	return trace.SpanKindInternal
}

// traceRequest passes the trace of ctx on to an outgoing request (unless
// the action set a traceparent header itself) and names the request on
// the action's span. target is the URL without query and user info.
func traceRequest(ctx context.Context, req *http.Request, target string) {
	if req.Header.Get(tracing.HeaderTraceparent) == "" {
		tracing.Inject(ctx, req.Header)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(attrHTTPMethod, req.Method), attribute.String(attrURL, target),
			attribute.String(attrServer, req.URL.Hostname()))
	}
}

// traceStatus records the answer's status on the action's span.
func traceStatus(ctx context.Context, status int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Int(attrHTTPStatus, status))
	}
}

// redactedURL is u without its query and user info.
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return redactURL(p)
}

// maxBulkLinks bounds the links of a _bulk span to its documents' actions.
const maxBulkLinks = 128

// startBulkSpan starts the client span of a _bulk request: the child of
// the first traced document's action, linked to the others'.
func (b *esBatcher) startBulkSpan(ctx context.Context, batch []*esDoc) (context.Context, trace.Span) {
	var parent trace.SpanContext
	var links []trace.Link
	for _, d := range batch {
		switch {
		case !d.span.IsValid():
		case !parent.IsValid():
			parent = d.span
		case len(links) < maxBulkLinks:
			links = append(links, trace.Link{SpanContext: d.span})
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	return b.tracer.Start(ctx, "elasticsearch _bulk", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String(attrDBSystem, "elasticsearch"), attribute.String(attrESEndpoint, b.endpoint),
			attribute.Int(attrBatchCount, len(batch)), attribute.String(attrHTTPMethod, http.MethodPost)))
}
