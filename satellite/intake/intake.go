package intake

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/ratelimit"
	"github.com/squallhq/squall/webhooks"
	"github.com/squallhq/squall/webhooks/signing"
)

// Pattern is the http.ServeMux pattern of the webhook endpoint.
const Pattern = "/engine/webhook/event/{id}"

// Kafka header names of an event record (docs/concepts.md, "Events").
const (
	HeaderEventID     = "squall-event-id"
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
	HeaderWebhook     = "squall-webhook"
	HeaderSource      = "squall-source"
)

// DefaultRetryAfter is the default Retry-After of 503 answers.
const DefaultRetryAfter = 30 * time.Second

// Config configures an [Intake].
type Config struct {
	// TenantID is the tenant of events whose webhook names none (DESIGN
	// decision 12; default webhooks.DefaultTenant, "master").
	TenantID string
	// Source names this intake in the squall-source header of every
	// event (the satellite's name). Required.
	Source string
	// RetryAfter is the Retry-After of 503 answers (default 30 s).
	RetryAfter time.Duration
	// DiscardTimeout bounds how long the rest of a body larger than its
	// webhook's limit is read and dropped before the 413 is sent
	// (default 5 s); at most twice the limit is read.
	DiscardTimeout time.Duration
	// Clients finds the client address of a call, for allow_ips and
	// per-client rate limits; nil takes the connection's peer.
	Clients *clientaddr.Resolver
	// Limits keeps the buckets of the webhooks' rate_limit (default: new
	// ones with ratelimit.DefaultMaxClients).
	Limits *ratelimit.Limiters
	// Dedupe remembers the delivery ids of webhooks with dedupe; without
	// it, their calls are answered 500.
	Dedupe Deduper
	// MaxCalls bounds the webhook calls handled at once (default
	// DefaultMaxCalls): one more is answered 503 OVERLOADED with
	// Retry-After before anything else is done, its body unread.
	MaxCalls int
	// MaxPendingBytes bounds the bytes the calls in progress hold for
	// Kafka: their bodies from the moment they are read (the declared
	// length, or the webhook's max_payload_size for a chunked body, until
	// it is read) and their events, until the sink has acknowledged or
	// spooled them (default DefaultMaxPendingBytes). A call that would go
	// over is answered 503 OVERLOADED with Retry-After, before its body is
	// read when it can be; a call alone always goes on, whatever its size.
	MaxPendingBytes int64
	// TracerProvider records a server span per call, the child of the
	// caller's traceparent; the event's traceparent header then names
	// it (or the sink's span). Nil records none: the event keeps the
	// caller's traceparent, or a new random one.
	TracerProvider trace.TracerProvider
}

// DefaultDiscardTimeout is the default Config.DiscardTimeout.
const DefaultDiscardTimeout = 5 * time.Second

// discardBytes is how much of an oversized body is read and dropped at
// most: twice the limit.
func (c Config) discardBytes(limit int64) int64 { return 2 * limit }

// Directory finds webhooks by id; the watcher's current set.
type Directory interface {
	// Lookup returns the webhook with the given id, or nil.
	Lookup(id string) *webhooks.Webhook
}

// Sink takes accepted events.
type Sink interface {
	// Publish returns nil once rec is acknowledged by Kafka or durably
	// spooled. rec is the sink's: it may keep its slices and the bytes of
	// its strings, which the intake does not modify. Errors wrapping ErrSpoolFull, ErrTooLarge or ErrClosed
	// choose the answer; any other error is a 503 UNAVAILABLE.
	Publish(ctx context.Context, rec Record) error
}

// Record is an accepted event, ready for Kafka.
type Record struct {
	// EventID is the event's UUIDv7, also in the squall-event-id header.
	EventID string
	// Key is the tenant id.
	Key string
	// Value is the event JSON: {"type", "created_ms", "metadata":
	// {"tenant_id"}, "payload"}.
	Value []byte
	// Headers are squall-event-id, traceparent, tracestate (when the
	// caller sent one), squall-webhook and squall-source, in this order.
	Headers []Header
	// Time is the event's creation time (created_ms).
	Time time.Time
	// Handed is when the record was handed to the sink (a clock reading,
	// monotonic): the sink's ack timeout counts from it, and a zero time
	// stands for the time of the call to Publish.
	Handed time.Time
}

// Header is one record header.
type Header struct {
	// Key is the header name, such as squall-event-id.
	Key string
	// Value is the header value.
	Value []byte
}

// Intake is the HTTP handler of the webhook endpoint
// POST /engine/webhook/event/{id}?token=…
type Intake struct {
	cfg    Config
	dir    Directory
	sink   Sink
	logger *slog.Logger
	// clientErrs logs refused calls (4xx) at debug, with a summary.
	clientErrs *httpguard.ClientErrors
	m          *metrics
	tracer     trace.Tracer // nil: tracing off
	bufs       sync.Pool
	ids        eventIDs

	// calls is the number of calls in progress, plus closedBit once
	// closed: one atomic add per call in and out, no lock.
	calls atomic.Int64
	// pending counts the bytes of bodies and events the calls in
	// progress hold (Config.MaxPendingBytes).
	pending   budget
	idle      chan struct{} // closed when closed and no call is in progress
	closeIdle sync.Once
}

// closedBit marks Intake.calls once the intake is closed.
const closedBit = 1 << 62

// New builds an Intake whose metrics are registered with reg (nil registers
// nothing).
func New(cfg Config, dir Directory, sink Sink, logger *slog.Logger, reg prometheus.Registerer) (*Intake, error) {
	if cfg.Source == "" {
		return nil, errors.New("intake config: source required")
	}
	if cfg.TenantID == "" {
		cfg.TenantID = webhooks.DefaultTenant
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.DiscardTimeout <= 0 {
		cfg.DiscardTimeout = DefaultDiscardTimeout
	}
	if cfg.Limits == nil {
		cfg.Limits = ratelimit.New(0)
	}
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "intake")
	in := &Intake{
		cfg:        cfg,
		dir:        dir,
		sink:       sink,
		logger:     logger,
		clientErrs: httpguard.NewClientErrors(logger, 0),
		tracer:     tracing.Tracer(cfg.TracerProvider, "satellite/intake"),
		bufs:       sync.Pool{New: func() any { return new(bytes.Buffer) }},
		idle:       make(chan struct{}),
		pending:    budget{max: cfg.MaxPendingBytes},
	}
	m, err := newMetrics(reg, func() float64 { return float64(in.calls.Load() &^ closedBit) },
		func() float64 { return float64(in.pending.used.Load()) })
	if err != nil {
		return nil, err
	}
	in.m = m
	return in, nil
}

// request is a webhook call as the intake's core sees it, whichever HTTP
// server took it: [Intake.ServeHTTP] (net/http) and [Intake.ServeFast]
// (fasthttp) each fill one in.
type request struct {
	// ctx is the call's context; it carries the call's span once the
	// caller is authenticated, when tracing.
	ctx context.Context
	// span is the call's span, nil until the caller is authenticated.
	span   trace.Span
	method string
	// id is the {id} of the path, and query the raw query string (which
	// may be the server's bytes: nothing keeps it past the call).
	id, query string
	// contentLength is the body's declared length, -1 when unknown
	// (chunked).
	contentLength int64
	header        headers
	front         front
}

// headers gives the values of a call's header fields, looked up in any
// case; [http.Header] is one.
type headers interface {
	// Get returns the first value of the field name, or "".
	Get(name string) string
	// Values returns all the values of the field name.
	Values(name string) []string
}

// front is what the core needs of the HTTP server that took a call.
type front interface {
	// peer returns the address of the connection's peer; the zero Addr
	// when it is not an IP address.
	peer() netip.Addr
	// remoteAddr returns the peer as host:port, for logs.
	remoteAddr() string
	// readBody appends the body to buf, or fails with errBodyTooLarge as
	// soon as it is longer than limit bytes.
	readBody(buf *bytes.Buffer, limit int64) error
	// discard reads and drops at most n bytes of what is left of the
	// body, for at most d, and makes the server close the connection
	// after the answer.
	discard(n int64, d time.Duration)
}

// errBodyTooLarge is the error of front.readBody past the limit.
var errBodyTooLarge = errors.New("body too large")

// result is the outcome of a call, for its front end to answer.
type result struct {
	// known reports whether the id named a webhook.
	known bool
	// wh is the webhook, when known.
	wh *webhooks.Webhook
	// counters are the webhook's cached counters once a call used them
	// (its first token verified, or its event accepted): looked up once
	// per call, and only then, as before (they make the series).
	counters *webhookCounters
	// eventID is the event's id (200 answers).
	eventID string
	// deduplicated reports a repeated delivery (200, Squall-Deduplicated).
	deduplicated bool
	// err is the answer other than 200; nil for 200.
	err *apiError
}

// okPrefix and okSuffix frame the event id in the body of a 200 answer:
// {"event_id":"…"}; a UUID needs no escaping.
const okPrefix, okSuffix = `{"event_id":"`, "\"}\n"

// handle runs a call through the checks and the sink, and logs a refusal.
func (in *Intake) handle(c *request, start time.Time) result {
	res, err := in.serve(c, start)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", err: err}
		}
		res.err = ae
		res.eventID, res.deduplicated = "", false
		in.logAnswer(c, ae)
	}
	return res
}

// finish counts an answered call in the metrics and ends its span: the
// span started when the caller was authenticated, or else one started now,
// at the call's start, that only the local sampler may record.
func (in *Intake) finish(c *request, start time.Time, res *result) {
	span := c.span
	if span == nil && in.tracer != nil {
		_, span = in.tracer.Start(c.ctx, spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	}
	status, reason := http.StatusOK, ""
	if res.err != nil {
		status, reason = res.err.status, res.err.reason
	}
	label := ""
	if res.known {
		label = res.wh.ID // only ids of the current set: unknown ids cannot grow the series
		if reason != "" {
			in.m.refused.WithLabelValues(label, reason).Inc()
		}
	}
	if res.known && status == http.StatusOK {
		if res.counters == nil {
			res.counters = in.m.webhook(label)
		}
		res.counters.ok.Inc()
	} else {
		in.m.requests.WithLabelValues(label, statusLabel(status)).Inc()
	}
	in.m.duration.Observe(time.Since(start).Seconds())
	if span == nil {
		return
	}
	if span.IsRecording() {
		if res.err != nil {
			span.SetAttributes(attribute.String(attrErrorType, res.err.code))
			if status >= 500 {
				span.SetStatus(codes.Error, res.err.message)
			}
		}
		span.SetAttributes(attribute.String(attrHTTPMethod, c.method), attribute.String(attrHTTPRoute, Pattern),
			attribute.Int(attrHTTPStatus, status))
		if res.known {
			span.SetAttributes(attribute.String(attrWebhook, res.wh.ID))
		}
		if res.eventID != "" {
			span.SetAttributes(attribute.String(attrEventID, res.eventID))
		}
	}
	span.End()
}

// serve runs the checks in order and hands the event to the sink.
func (in *Intake) serve(c *request, now time.Time) (res result, err error) {
	if c.method != http.MethodPost {
		return res, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
			params: map[string]any{"method": strings.Clone(c.method)}, message: "only POST is allowed"}
	}
	switch in.enter() {
	case entryClosed:
		return res, &apiError{status: http.StatusServiceUnavailable, code: CodeShuttingDown,
			message: "the intake is shutting down", retryAfter: in.cfg.RetryAfter}
	case entryFull:
		return res, in.overCalls()
	}
	defer in.leave()

	wh := in.dir.Lookup(c.id)
	if wh == nil {
		id := c.id
		if len(id) > webhooks.MaxIDLen {
			id = id[:webhooks.MaxIDLen]
		}
		return res, &apiError{status: http.StatusNotFound, code: CodeNotFound,
			params: map[string]any{"id": strings.Clone(id)}, message: "no webhook with this id"}
	}
	res.known, res.wh = true, wh
	client, err := in.checkAddress(c, wh)
	if err != nil {
		return res, err
	}
	token, tokens := queryToken(c.query)
	tokenIndex, ok := -1, false
	if tokens == 1 {
		tokenIndex, ok = wh.MatchToken(token, now)
	}
	if !ok {
		msg := "wrong token"
		if tokens == 0 {
			msg = "missing token"
		}
		return res, &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, message: msg, reason: ReasonToken}
	}
	if tokenIndex == 0 {
		res.counters = in.m.webhook(wh.ID)
		res.counters.token0.Inc()
	} else {
		in.m.credentialVerified(wh.ID, credentialToken, tokenIndex)
	}
	if err := in.checkRate(wh, client, now); err != nil {
		return res, err
	}

	limit := wh.MaxPayloadSize
	tooLarge := func() *apiError {
		// Clients that write the whole body before they read the
		// answer would see a broken pipe if the connection closed now:
		// read and drop up to twice the limit, for a bounded time,
		// then answer and close.
		c.front.discard(in.cfg.discardBytes(limit), in.cfg.DiscardTimeout)
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge, reason: ReasonSize,
			params: map[string]any{"limit": limit}, message: fmt.Sprintf("the body is larger than %d bytes", limit)}
	}
	if c.contentLength > limit {
		return res, tooLarge() // no byte of the body is kept
	}
	// The bytes this call holds for Kafka: its body's, at most, until
	// it is read, then the body's and the event's.
	held := c.contentLength
	if held < 0 {
		held = limit
	}
	if !in.pending.take(0, held) {
		return res, in.overBytes()
	}
	defer func() { in.pending.give(held) }()
	buf := in.bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			in.bufs.Put(buf)
		}
	}()
	buf.Reset()
	if c.contentLength > 0 {
		buf.Grow(int(c.contentLength))
	}
	if err := c.front.readBody(buf, limit); err != nil {
		if errors.Is(err, errBodyTooLarge) {
			return res, tooLarge()
		}
		return res, &apiError{status: http.StatusBadRequest, code: CodeBodyNotJSON, message: "cannot read the body", err: err}
	}
	body := buf.Bytes()
	if n := int64(len(body)); n < held {
		in.pending.give(held - n)
		held = n
	}

	var signedID string // the message id the signature covers, if any
	if sig := wh.Signature; sig != nil {
		index, id, err := sig.VerifyID(c.header, body, now)
		if err != nil {
			return res, signatureError(sig, err)
		}
		signedID = id
		in.m.credentialVerified(wh.ID, credentialSecret, index)
	}
	// The caller is authenticated: its trace context may now be the
	// parent of the call's span.
	in.startSpan(c, now)

	claim, err := in.claim(c, wh, body, signedID, now)
	if err != nil {
		return res, err
	}
	if claim != nil {
		if claim.Duplicate {
			in.m.deduplicated.WithLabelValues(wh.ID).Inc()
			// Also among the refusals by reason: the repeat made no
			// event, though it is answered 200 with the first event id.
			in.m.refused.WithLabelValues(wh.ID, ReasonDuplicate).Inc()
			res.eventID, res.deduplicated = claim.EventID, true
			return res, nil
		}
		defer claim.Abort() // unless committed below
	}

	// One allocation holds the event and its header values; both stay
	// with the record until Kafka or the spool has them.
	size := len(body) + 256 + len(wh.ID) + len(in.cfg.Source)
	if !in.pending.take(held, int64(size)) {
		return res, in.overBytes()
	}
	held += int64(size)
	b := make([]byte, 0, size)
	value, tenant, err := wh.Collector().AppendEvent(b, body, now, in.cfg.TenantID)
	if err != nil {
		var te *webhooks.TemplateError
		switch {
		case errors.Is(err, webhooks.ErrBodyNotJSON):
			return res, &apiError{status: http.StatusBadRequest, code: CodeBodyNotJSON, message: err.Error()}
		case errors.Is(err, webhooks.ErrEventTooDeep):
			return res, &apiError{status: http.StatusBadRequest, code: CodeEventTooDeep, reason: ReasonDepth,
				params: map[string]any{"max_depth": jsonlimit.MaxEventDepth}, message: err.Error()}
		case errors.As(err, &te):
			return res, &apiError{status: http.StatusUnprocessableEntity, code: CodeTemplate,
				params: map[string]any{"field": te.Field}, message: te.Error()}
		}
		return res, fmt.Errorf("collect: %w", err)
	}

	rec := in.record(c, wh, value, tenant, now)
	// Not now, the call's start: the body may have been slow to come, or
	// a concurrent delivery waited for; the ack timeout counts from here.
	rec.Handed = time.Now()
	// The caller hanging up does not stop the event: it may be accepted
	// anyway, and the caller will retry (at least once). A context that
	// cannot end (a fasthttp call's) is passed as it is.
	ctx := c.ctx
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if err := in.sink.Publish(ctx, rec); err != nil {
		return res, in.sinkError(err)
	}
	if claim != nil {
		// A copy: the id alone is remembered, not the record's buffer
		// it shares.
		claim.Commit(strings.Clone(rec.EventID), now.Add(wh.Dedupe.Window))
	}
	if res.counters == nil {
		res.counters = in.m.webhook(wh.ID)
	}
	res.counters.accepted.Inc()
	res.eventID = rec.EventID
	return res, nil
}

// signatureError maps a refused signature to the answer.
func signatureError(sig *signing.Verifier, err error) *apiError {
	header := sig.Header()
	var se *signing.Error
	if errors.As(err, &se) {
		header = se.Header
	}
	params := map[string]any{"header": header}
	switch {
	case errors.Is(err, signing.ErrTimestamp):
		params["tolerance"] = sig.Tolerance().String()
		return &apiError{status: http.StatusUnauthorized, code: CodeSignatureTimestamp, params: params, reason: ReasonTimestamp,
			message: fmt.Sprintf("the signature's timestamp is more than %s from the satellite's clock", sig.Tolerance())}
	case errors.Is(err, signing.ErrMalformed):
		params["max_length"] = signing.MaxHeaderLen
		return &apiError{status: http.StatusBadRequest, code: CodeBadSignatureHeader, params: params, reason: ReasonSignature,
			message: "the header " + header + " cannot be parsed or is too long"}
	case errors.Is(err, signing.ErrAmbiguous):
		params["headers"] = []string{signing.HeaderWebhookID, signing.HeaderSvixID}
		return &apiError{status: http.StatusBadRequest, code: CodeBadSignatureHeader, params: params, reason: ReasonSignature,
			message: "the call carries two different message ids (" + signing.HeaderWebhookID + " and " + signing.HeaderSvixID + ")"}
	case errors.Is(err, signing.ErrMissing):
		return &apiError{status: http.StatusUnauthorized, code: CodeBadSignature, params: params, reason: ReasonSignature,
			message: "missing signature: no header " + header}
	}
	return &apiError{status: http.StatusUnauthorized, code: CodeBadSignature, params: params, reason: ReasonSignature,
		message: "wrong signature"}
}

// record builds the Kafka record of an event whose JSON is value. The header
// values go after value, in its spare capacity when it has some.
func (in *Intake) record(c *request, wh *webhooks.Webhook, value []byte, tenant string, now time.Time) Record {
	b := value[len(value):] // empty, with the spare capacity
	value = value[:len(value):len(value)]
	var random [randomLen]byte
	crand.Read(random[:]) // never fails (Go 1.24+)
	headers := make([]Header, 0, 5)
	start := len(b)
	b = in.ids.appendNew(b, now, random[:8])
	eventID := len(b)
	var tracestate string
	if sc := in.spanContext(c.ctx); sc.IsValid() {
		// The call's span is the parent of what follows.
		b = tracing.AppendTraceparent(b, sc)
		tracestate = sc.TraceState().String()
	} else {
		b, tracestate = appendTraceparent(b, c.header, random[8:])
	}
	traceparent := len(b)
	b = append(b, tracestate...)
	b = append(b, wh.ID...)
	webhook := len(b)
	b = append(b, in.cfg.Source...)
	headers = append(headers, Header{HeaderEventID, b[start:eventID:eventID]}, Header{HeaderTraceparent, b[eventID:traceparent:traceparent]})
	if tracestate != "" {
		headers = append(headers, Header{HeaderTracestate, b[traceparent : traceparent+len(tracestate) : traceparent+len(tracestate)]})
	}
	headers = append(headers, Header{HeaderWebhook, b[webhook-len(wh.ID) : webhook : webhook]}, Header{HeaderSource, b[webhook:len(b):len(b)]})
	return Record{
		EventID: string(b[start:eventID]),
		Key:     tenant,
		Value:   value,
		Headers: headers,
		Time:    time.UnixMilli(now.UnixMilli()),
	}
}

// sinkError maps an error of the sink to the answer.
func (in *Intake) sinkError(err error) *apiError {
	switch {
	case errors.Is(err, ErrSpoolFull):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeSpoolFull,
			message: "Kafka is unavailable and the local spool is full", retryAfter: in.cfg.RetryAfter, err: err}
	case errors.Is(err, ErrTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeEventTooLarge,
			message: "the event is larger than a Kafka record may be", err: err}
	case errors.Is(err, ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeShuttingDown,
			message: "the intake is shutting down", retryAfter: in.cfg.RetryAfter, err: err}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
		message: "the event could not be stored", retryAfter: in.cfg.RetryAfter, err: err}
}

// logAnswer logs an error answer once: server-side failures as errors,
// refused calls at debug level, with a summary of them at info level once
// a minute. Calls shed by the intake's bounds (OVERLOADED) or because it
// is closed (SHUTTING_DOWN, but for a sink closed under a call) are refused
// calls: the intake works as designed.
func (in *Intake) logAnswer(c *request, e *apiError) {
	if e.status < 500 || e.code == CodeOverloaded || e.code == CodeShuttingDown && e.err == nil {
		in.clientErrs.Record(c.ctx, e.status, e.code, "webhook call refused", "webhook", c.id, "remote", c.front.remoteAddr())
		return
	}
	if !in.logger.Enabled(c.ctx, slog.LevelError) {
		return
	}
	attrs := []any{"webhook", c.id, "status", e.status, "code", e.code, "remote", c.front.remoteAddr()}
	if e.err != nil {
		attrs = append(attrs, "error", e.err)
	}
	in.logger.Log(c.ctx, slog.LevelError, "webhook call refused", attrs...)
}

// Outcomes of Intake.enter.
const (
	entered = iota
	entryClosed
	entryFull
)

// enter counts a call in, unless the intake is closed or handles
// Config.MaxCalls calls already.
func (in *Intake) enter() int {
	n := in.calls.Add(1)
	switch {
	case n&closedBit != 0:
		in.leave()
		return entryClosed
	case n > int64(in.cfg.MaxCalls):
		in.leave()
		return entryFull
	}
	return entered
}

// leave counts a call out.
func (in *Intake) leave() {
	if in.calls.Add(-1) == closedBit {
		in.closeIdle.Do(func() { close(in.idle) })
	}
}

// Close stops taking events: new calls get 503 SHUTTING_DOWN. Calls in
// progress go on; [Intake.Drain] waits for them. The summary of refused
// calls not yet logged is logged now.
func (in *Intake) Close() {
	in.clientErrs.Close()
	if in.calls.Or(closedBit) == 0 { // open, no call in progress
		in.closeIdle.Do(func() { close(in.idle) })
	}
}

// Drain closes the intake and waits until the calls in progress are
// answered, or ctx ends.
func (in *Intake) Drain(ctx context.Context) error {
	in.Close()
	select {
	case <-in.idle:
		return nil
	default:
	}
	select {
	case <-in.idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain intake: %w", ctx.Err())
	}
}

// queryToken returns the value of the token query parameter and the number
// of times it is given, as the URL's parsed query would have it.
func queryToken(q string) (string, int) {
	if !simpleQuery(q) {
		// Escapes, separators url.ParseQuery refuses, many parameters:
		// leave them to it.
		values, _ := url.ParseQuery(q)
		tokens := values["token"]
		if len(tokens) == 0 {
			return "", 0
		}
		return tokens[0], len(tokens)
	}
	token, n := "", 0
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if key, value, _ := strings.Cut(pair, "="); key == "token" {
			if n == 0 {
				token = value
			}
			n++
		}
	}
	return token, n
}

// simpleQuery reports whether q has no escape, no separator
// url.ParseQuery refuses and fewer than 100 parameters, in one pass over it.
func simpleQuery(q string) bool {
	amps := 0
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '%', '+', ';':
			return false
		case '&':
			amps++
		}
	}
	return amps < 100
}

// statusLabel is the code label of an answer.
func statusLabel(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusNotFound:
		return "404"
	case http.StatusUnauthorized:
		return "401"
	}
	return strconv.Itoa(status)
}
