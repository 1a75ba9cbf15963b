package intake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/ratelimit"
	"github.com/squallhq/squall/webhooks"
	"github.com/squallhq/squall/webhooks/httpguard"
	"github.com/squallhq/squall/webhooks/signing"
	"github.com/squallhq/squall/webhooks/tracing"
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
	// spooled. Errors wrapping ErrSpoolFull, ErrTooLarge or ErrClosed
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

	mu       sync.Mutex
	closed   bool
	inflight int
	idle     chan struct{} // closed when closed and inflight is 0
}

var _ http.Handler = (*Intake)(nil)

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
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	logger = logger.With("component", "intake")
	return &Intake{
		cfg:        cfg,
		dir:        dir,
		sink:       sink,
		logger:     logger,
		clientErrs: httpguard.NewClientErrors(logger, 0),
		m:          m,
		tracer:     tracing.Tracer(cfg.TracerProvider, "satellite/intake"),
		bufs:       sync.Pool{New: func() any { return new(bytes.Buffer) }},
		idle:       make(chan struct{}),
	}, nil
}

// Register adds the webhook endpoint to mux.
func (in *Intake) Register(mux *http.ServeMux) { mux.Handle(Pattern, in) }

// ServeHTTP handles one webhook call. It answers 200 {"event_id": …} once the
// sink took the event, or an error with a JSON body.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.PathValue("id")
	if id == "" {
		id = strings.TrimPrefix(r.URL.Path, "/engine/webhook/event/")
	}
	var span trace.Span
	if in.tracer != nil {
		r, span = in.startSpan(r)
	}
	known, eventID, err := in.serve(w, r, id, start)
	status, reason := http.StatusOK, ""
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", err: err}
		}
		status, reason = ae.status, ae.reason
		if span != nil && span.IsRecording() {
			span.SetAttributes(attribute.String(attrErrorType, ae.code))
			if status >= 500 {
				span.SetStatus(codes.Error, ae.message)
			}
		}
		in.logAnswer(r, id, ae)
		writeError(w, ae)
	} else {
		// {"event_id":"…"}: a UUID needs no escaping.
		const prefix, suffix = `{"event_id":"`, "\"}\n"
		values := make([]string, 3) // one allocation for the three headers
		values[0], values[1], values[2] = eventID, "application/json", strconv.Itoa(len(prefix)+len(eventID)+len(suffix))
		h := w.Header()
		h["Squall-Event-Id"] = values[0:1:1]
		h["Content-Type"] = values[1:2:2]
		h["Content-Length"] = values[2:3:3]
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, prefix)
		io.WriteString(w, eventID)
		io.WriteString(w, suffix)
	}
	label := ""
	if known {
		label = id // only ids of the current set: unknown ids cannot grow the series
		if reason != "" {
			in.m.refused.WithLabelValues(id, reason).Inc()
		}
	}
	if known && status == http.StatusOK {
		in.m.webhook(id).ok.Inc()
	} else {
		in.m.requests.WithLabelValues(label, statusLabel(status)).Inc()
	}
	in.m.duration.Observe(time.Since(start).Seconds())
	if span != nil {
		if span.IsRecording() {
			span.SetAttributes(attribute.String(attrHTTPMethod, r.Method), attribute.String(attrHTTPRoute, Pattern),
				attribute.Int(attrHTTPStatus, status))
			if known {
				span.SetAttributes(attribute.String(attrWebhook, id))
			}
			if eventID != "" {
				span.SetAttributes(attribute.String(attrEventID, eventID))
			}
		}
		span.End()
	}
}

// serve runs the checks in order and hands the event to the sink. known
// reports whether id named a webhook.
func (in *Intake) serve(w http.ResponseWriter, r *http.Request, id string, now time.Time) (known bool, eventID string, err error) {
	if r.Method != http.MethodPost {
		return false, "", &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
			params: map[string]any{"method": r.Method}, message: "only POST is allowed"}
	}
	if !in.enter() {
		return false, "", &apiError{status: http.StatusServiceUnavailable, code: CodeShuttingDown,
			message: "the intake is shutting down", retryAfter: in.cfg.RetryAfter}
	}
	defer in.leave()
	in.m.inflight.Inc()
	defer in.m.inflight.Dec()

	wh := in.dir.Lookup(id)
	if wh == nil {
		if len(id) > webhooks.MaxIDLen {
			id = id[:webhooks.MaxIDLen]
		}
		return false, "", &apiError{status: http.StatusNotFound, code: CodeNotFound,
			params: map[string]any{"id": id}, message: "no webhook with this id"}
	}
	client, err := in.checkAddress(r, wh)
	if err != nil {
		return true, "", err
	}
	token, tokens := queryToken(r.URL)
	tokenIndex, ok := -1, false
	if tokens == 1 {
		tokenIndex, ok = wh.MatchToken(token, now)
	}
	if !ok {
		msg := "wrong token"
		if tokens == 0 {
			msg = "missing token"
		}
		return true, "", &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, message: msg, reason: ReasonToken}
	}
	in.m.credentialVerified(wh.ID, credentialToken, tokenIndex)
	if err := in.checkRate(wh, client, now); err != nil {
		return true, "", err
	}

	limit := wh.MaxPayloadSize
	rawBody := r.Body
	tooLarge := func() *apiError {
		// Clients that write the whole body before they read the
		// answer would see a broken pipe if the connection closed now:
		// read and drop up to twice the limit, for a bounded time,
		// then answer and close.
		httpguard.Discard(w, rawBody, in.cfg.discardBytes(limit), in.cfg.DiscardTimeout)
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge, reason: ReasonSize,
			params: map[string]any{"limit": limit}, message: fmt.Sprintf("the body is larger than %d bytes", limit)}
	}
	if r.ContentLength > limit {
		return true, "", tooLarge() // no byte of the body is kept
	}
	buf := in.bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			in.bufs.Put(buf)
		}
	}()
	buf.Reset()
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	// MaxBytesReader stops at the limit and makes the server close the
	// connection instead of reading the rest.
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return true, "", tooLarge()
		}
		return true, "", &apiError{status: http.StatusBadRequest, code: CodeBodyNotJSON, message: "cannot read the body", err: err}
	}
	body := buf.Bytes()

	if sig := wh.Signature; sig != nil {
		index, err := sig.Verify(r.Header, body, now)
		if err != nil {
			return true, "", signatureError(sig, err)
		}
		in.m.credentialVerified(wh.ID, credentialSecret, index)
	}

	claim, err := in.claim(r, wh, body, now)
	if err != nil {
		return true, "", err
	}
	if claim != nil {
		if claim.Duplicate {
			in.m.deduplicated.WithLabelValues(wh.ID).Inc()
			// Also among the refusals by reason: the repeat made no
			// event, though it is answered 200 with the first event id.
			in.m.refused.WithLabelValues(wh.ID, ReasonDuplicate).Inc()
			w.Header().Set(HeaderDeduplicated, "true")
			return true, claim.EventID, nil
		}
		defer claim.Abort() // unless committed below
	}

	// One allocation holds the event and its header values; both stay
	// with the record until Kafka or the spool has them.
	b := make([]byte, 0, len(body)+256+len(wh.ID)+len(in.cfg.Source))
	value, tenant, err := wh.Collector().AppendEvent(b, body, now, in.cfg.TenantID)
	if err != nil {
		var te *webhooks.TemplateError
		switch {
		case errors.Is(err, webhooks.ErrBodyNotJSON):
			return true, "", &apiError{status: http.StatusBadRequest, code: CodeBodyNotJSON, message: err.Error()}
		case errors.As(err, &te):
			return true, "", &apiError{status: http.StatusUnprocessableEntity, code: CodeTemplate,
				params: map[string]any{"field": te.Field}, message: te.Error()}
		}
		return true, "", fmt.Errorf("collect: %w", err)
	}

	rec := in.record(r, wh, value, tenant, now)
	// The caller hanging up does not stop the event: it may be accepted
	// anyway, and the caller will retry (at least once).
	if err := in.sink.Publish(context.WithoutCancel(r.Context()), rec); err != nil {
		return true, "", in.sinkError(err)
	}
	if claim != nil {
		claim.Commit(rec.EventID, now.Add(wh.Dedupe.Window))
	}
	in.m.webhook(wh.ID).accepted.Inc()
	return true, rec.EventID, nil
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
	case errors.Is(err, signing.ErrMissing):
		return &apiError{status: http.StatusUnauthorized, code: CodeBadSignature, params: params, reason: ReasonSignature,
			message: "missing signature: no header " + header}
	}
	return &apiError{status: http.StatusUnauthorized, code: CodeBadSignature, params: params, reason: ReasonSignature,
		message: "wrong signature"}
}

// record builds the Kafka record of an event whose JSON is value. The header
// values go after value, in its spare capacity when it has some.
func (in *Intake) record(r *http.Request, wh *webhooks.Webhook, value []byte, tenant string, now time.Time) Record {
	b := value[len(value):] // empty, with the spare capacity
	value = value[:len(value):len(value)]
	var random [randomLen]byte
	rand.Read(random[:])
	headers := make([]Header, 0, 5)
	start := len(b)
	b = in.ids.appendNew(b, now, random[:8])
	eventID := len(b)
	var tracestate string
	if sc := in.spanContext(r); sc.IsValid() {
		// The call's span is the parent of what follows.
		b = tracing.AppendTraceparent(b, sc)
		tracestate = sc.TraceState().String()
	} else {
		b, tracestate = appendTraceparent(b, r.Header, random[8:])
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
// a minute.
func (in *Intake) logAnswer(r *http.Request, id string, e *apiError) {
	if e.status < 500 {
		in.clientErrs.Record(r.Context(), e.status, e.code, "webhook call refused", "webhook", id, "remote", r.RemoteAddr)
		return
	}
	if !in.logger.Enabled(r.Context(), slog.LevelError) {
		return
	}
	attrs := []any{"webhook", id, "status", e.status, "code", e.code, "remote", r.RemoteAddr}
	if e.err != nil {
		attrs = append(attrs, "error", e.err)
	}
	in.logger.Log(r.Context(), slog.LevelError, "webhook call refused", attrs...)
}

// enter counts a call in, unless the intake is closed.
func (in *Intake) enter() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.inflight++
	return true
}

// leave counts a call out.
func (in *Intake) leave() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.inflight--
	if in.closed && in.inflight == 0 {
		close(in.idle)
	}
}

// Close stops taking events: new calls get 503 SHUTTING_DOWN. Calls in
// progress go on; [Intake.Drain] waits for them. The summary of refused
// calls not yet logged is logged now.
func (in *Intake) Close() {
	in.clientErrs.Close()
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		if in.inflight == 0 {
			close(in.idle)
		}
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

// writeJSON writes v as the JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"INTERNAL","params":{},"message":"encode answer"}`)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// queryToken returns the value of the token query parameter and the number
// of times it is given, as the URL's parsed query would have it.
func queryToken(u *url.URL) (string, int) {
	q := u.RawQuery
	if strings.ContainsAny(q, "%+;") || strings.Count(q, "&") >= 100 {
		// Escapes, separators url.ParseQuery refuses, many parameters:
		// leave them to it.
		tokens := u.Query()["token"]
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
