package master

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// Error codes of the master's own endpoints (docs/decisions.md decision 16).
const (
	codeBadRequest     = "BAD_REQUEST"
	codeUnauthorized   = "UNAUTHORIZED"
	codeForbidden      = "FORBIDDEN"
	codeMemberNotFound = "MEMBER_NOT_FOUND"
	codeValidation     = "VALIDATION_ERROR"
	codeTooLarge       = "PAYLOAD_TOO_LARGE"
	codeNoLeader       = "NO_LEADER"
	// codeLeaderUnavailable: a leader is known but did not serve the
	// request within the leader wait (unreachable, or not confirmed by a
	// quorum yet); NO_LEADER is for when none is known.
	codeLeaderUnavailable = "LEADER_UNAVAILABLE"
	codeLeaderLost        = "LEADER_LOST"
	codeNotReady          = "NOT_READY"
	codeUnavailable       = "UNAVAILABLE"
	codeUnreachable       = "NODE_UNREACHABLE"
)

// apiError is an error answer: a status and the JSON body
// {"code", "params", "message"} of docs/decisions.md decision 16.
type apiError = apierror.Error

func errorf(status int, code, format string, args ...any) *apiError {
	return apierror.Errorf(status, code, format, args...)
}

// noLeader is the answer while no leader can serve a request.
func noLeader(format string, args ...any) *apiError {
	e := errorf(http.StatusServiceUnavailable, codeNoLeader, format, args...)
	e.RetryAfter = 1
	return e
}

// toAPIError maps the errors of the layers below onto answers.
func toAPIError(err error) *apiError {
	var e *apiError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrUnreachable):
		return errorf(http.StatusBadGateway, codeUnreachable, "%s", err)
	case errors.Is(err, store.ErrIdentity):
		return errorf(http.StatusForbidden, codeForbidden, "%s", err)
	case errors.Is(err, store.ErrUnknownMember):
		return errorf(http.StatusNotFound, codeMemberNotFound, "%s", err)
	case errors.Is(err, store.ErrInvalidTree):
		return errorf(http.StatusConflict, codeValidation, "%s", err)
	case errors.Is(err, store.ErrInvalidCommand):
		return errorf(http.StatusBadRequest, codeBadRequest, "%s", err)
	case errors.Is(err, store.ErrNotLeader), errors.Is(err, store.ErrTimeout):
		return noLeader("%s", err)
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrNotOpen):
		e := errorf(http.StatusServiceUnavailable, codeUnavailable, "%s", err)
		e.RetryAfter = 1
		return e
	}
	// Authentication, body limits and ended contexts.
	if e := apierror.Common(err); e != nil {
		return e
	}
	return apierror.Internal(err)
}

// handlerFunc is an endpoint: it writes its answer itself on success and
// returns an error otherwise, which wrap writes.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// wrap turns an endpoint into an http.Handler that answers its errors.
func (s *Server) wrap(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// writeError answers err as JSON with its status and logs it, once.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) && r.Body != nil && r.Body != http.NoBody {
		// A refused caller's body is not read, not even to reuse the
		// connection.
		w.Header().Set("Connection", "close")
	}
	if e.Status == http.StatusServiceUnavailable {
		s.metrics.unavailable.WithLabelValues(e.Code).Inc()
	}
	if e.Status < 500 {
		s.clientErrs.Record(r.Context(), e.Status, e.Code, "request failed", keyMethod, r.Method, keyPath, r.URL.Path, keyError, e.Message)
		apierror.Write(w, e)
		return
	}
	level := slog.LevelInfo
	if e.Status != http.StatusServiceUnavailable {
		level = slog.LevelError
	}
	pub, id := e.Public()
	attrs := []any{keyMethod, r.Method, keyPath, r.URL.Path, keyStatus, e.Status, keyCode, e.Code, keyError, e.Message}
	if id != "" {
		attrs = append(attrs, keyRequestID, id)
	}
	s.logger.Log(r.Context(), level, "request failed", attrs...)
	apierror.Write(w, pub)
}

// writeJSON writes v as a JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) { apierror.WriteJSON(w, status, v) }

// decodeBody decodes a JSON body of at most limit bytes strictly, after
// checking its nesting depth (apierror.DecodeStrict).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	_, err := apierror.DecodeStrict(w, r, limit, jsonlimit.Limits{}, v)
	return err
}

// Log attribute keys.
const (
	keyMethod    = "method"
	keyPath      = "path"
	keyStatus    = "status"
	keyCode      = "code"
	keyError     = "error"
	keyRequestID = "request_id"
	keyNode      = "node"
	keyURL       = "url"
	keyDuration  = "duration"
)

// statusWriter records the status of an answer for the request metrics,
// and marks every answer nosniff and, when the request carries a token
// (private), no-store: whatever the handler (mounted ones and answers
// relayed from the leader included) set, so each appears once.
type statusWriter struct {
	http.ResponseWriter
	status  int
	private bool
	body    *readTracker // the request's body; nil without one
}

// markHeader sets the headers every answer gets, before the status line:
// and a refusal (4xx, 5xx) of a request whose body was not read to its end
// closes the connection, so that it is answered at once instead of after
// the server read (or waited for) the rest of the body to reuse the
// connection — whichever handler refused it (no route, a wrong method, a
// mounted API's own checks).
func (w *statusWriter) markHeader() {
	h := w.ResponseWriter.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if w.private {
		h.Set("Cache-Control", "no-store")
	}
	if w.status >= 400 && w.body != nil && !w.body.done.Load() {
		h.Set("Connection", "close")
	}
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		w.markHeader()
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.markHeader()
	}
	return w.ResponseWriter.Write(b)
}

// readTracker is a request body that records whether it was read to its
// end. A forwarded request's body is read by the proxy's transport while
// the answer may be written: done is atomic.
type readTracker struct {
	io.ReadCloser
	done atomic.Bool
}

func (b *readTracker) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer
// (flushes of proxied answers).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveHTTP dispatches to the routes, answers unknown paths and methods in
// JSON, and records the request metrics.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, private: r.Header.Get("Authorization") != ""}
	if r.Body != nil && r.Body != http.NoBody {
		sw.body = &readTracker{ReadCloser: r.Body}
		r = r.WithContext(r.Context()) // a copy: the server's request keeps its own body
		r.Body = sw.body
	}
	h, pattern, ok := s.prefixRouteOf(r)
	if !ok {
		h, pattern = s.mux.Handler(r)
	}
	if s.tracer != nil {
		var span trace.Span
		r, span = s.startSpan(r, pattern)
		defer func() {
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int(attrHTTPStatus, status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}()
	}
	if pattern == "" {
		s.writeError(sw, r, apierror.NoRoute(h, w, r))
		pattern = "none"
	} else if r.RequestURI != "*" && !strings.Contains(pattern, "{") {
		// Served with the handler matched above, not matched again by
		// s.mux.ServeHTTP: a pattern without wildcards has no path
		// values to set, only the pattern. (The mux answers "*" itself.)
		r.Pattern = pattern
		h.ServeHTTP(sw, r)
	} else {
		s.mux.ServeHTTP(sw, r)
	}
	if sw.status == 0 {
		sw.WriteHeader(http.StatusOK) // what net/http would send, with the marks
	}
	s.metrics.requests.WithLabelValues(pattern, r.Method, strconv.Itoa(sw.status)).Inc()
	s.metrics.duration.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
}

// Span attribute keys of an API request (OpenTelemetry semantic
// conventions).
const (
	attrHTTPMethod = "http.request.method"
	attrHTTPRoute  = "http.route"
	attrHTTPStatus = "http.response.status_code"
)

// startSpan starts the server span of an API request, the child of the
// caller's traceparent, named for its route, and returns the request
// carrying it.
func (s *Server) startSpan(r *http.Request, pattern string) (*http.Request, trace.Span) {
	route := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	}
	name := r.Method + " " + route
	if route == "" {
		name = r.Method
	}
	ctx := tracing.Extract(r.Context(), r.Header)
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(attrHTTPMethod, r.Method), attribute.String(attrHTTPRoute, route)))
	return r.WithContext(ctx), span
}
