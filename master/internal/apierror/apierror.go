// Package apierror is the error answer of the master's HTTP APIs: a status
// and the JSON body {"code", "params", "message"} of docs/decisions.md
// decision 16, the mapping of the errors every API answers alike, and the
// writing of JSON answers.
//
// A 500 answer names a request id and says nothing else, as
// httpguard.WriteInternalError writes it for a handler's panic: its error
// text, which may hold paths, addresses or other internals, goes to the
// log with the same id ([Error.Public]).
package apierror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// Codes shared by the APIs.
const (
	CodeNoLeader    = "NO_LEADER"
	CodeLeaderLost  = "LEADER_LOST"
	CodeUnavailable = "UNAVAILABLE"
)

// ParamRequestID is the parameter of a 500 answer that names the log line
// holding its details (also in the httpguard.HeaderRequestID header).
const ParamRequestID = "request_id"

// Error is an error answer.
type Error struct {
	Status  int               `json:"-"`
	Code    string            `json:"code"`
	Params  map[string]string `json:"params"`
	Message string            `json:"message"`
	// Details, when set, is a structured account of the error (such as
	// the failures of a deploy's rule tests), sent as "details".
	Details any `json:"details,omitempty"`
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf builds an answer with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal is the answer to an error no case maps: 500, with the error's
// text as the message, which [Error.Public] keeps out of the answer.
func Internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: httpguard.CodeInternal, Message: err.Error()}
}

// Common maps the errors every master API answers alike, and returns nil
// for any other: an *Error as it is; authentication and permission
// failures; a body too large or too slow; a reused idempotency key; a
// command whose leader was lost, no leader, a closed store and an ended
// context, each 503 with Retry-After.
func Common(err error) *Error {
	var e *Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, auth.ErrUnauthenticated):
		return &Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Message: err.Error()}
	case errors.Is(err, auth.ErrForbidden):
		return &Error{Status: http.StatusForbidden, Code: "FORBIDDEN", Message: err.Error()}
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)}
	case httpguard.IsTimeout(err):
		return &Error{Status: http.StatusRequestTimeout, Code: "REQUEST_TIMEOUT", Message: "the body was not received in time"}
	case errors.Is(err, store.ErrRequestMismatch):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "IDEMPOTENCY_KEY_REUSED", Message: err.Error() +
			": an Idempotency-Key names one request (method, path and body); use a new key for a new request"}
	case errors.Is(err, store.ErrLeadershipLost):
		// This node led when it proposed the command and lost the
		// leadership before the command committed: the next leader may
		// still commit it. The same answer as a follower gives when
		// the leader it forwarded to failed with the request.
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLeaderLost, Message: err.Error() + ": it may or may not have been applied", RetryAfter: 1}
	case errors.Is(err, store.ErrNotLeader), errors.Is(err, store.ErrTimeout), errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrNotOpen):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeNoLeader, Message: err.Error(), RetryAfter: 1}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error(), RetryAfter: 1}
	}
	return nil
}

// IsBodyCut reports whether err is a read of a request's body that its
// size limit (http.MaxBytesReader) or its deadline cut: Common answers it
// (413 or 408), where any other error reading a body is the client's 400.
func IsBodyCut(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe) || httpguard.IsTimeout(err)
}

// Public returns what a client may see of e, and the request id to log
// e's details with ("" when there is nothing to hide). A 500's message may
// hold internal details: its answer carries only a new request id.
func (e *Error) Public() (*Error, string) {
	if e.Status != http.StatusInternalServerError {
		return e, ""
	}
	id := httpguard.NewRequestID()
	return &Error{Status: e.Status, Code: httpguard.CodeInternal, Params: map[string]string{ParamRequestID: id}}, id
}

// Write answers e as JSON with its status: Retry-After when set, and
// params never null. Call it with the answer [Error.Public] returns: a 500
// is written by httpguard.WriteInternalError, with its request id.
func Write(w http.ResponseWriter, e *Error) {
	if id := e.Params[ParamRequestID]; e.Status == http.StatusInternalServerError && id != "" {
		httpguard.WriteInternalError(w, id)
		return
	}
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, e)
}

// encodeFailed is the answer when an answer cannot be encoded.
var encodeFailed = []byte(`{"code":"INTERNAL","params":{},"message":"cannot encode the response"}`)

// WriteJSON writes v as a JSON answer with status, followed by a newline.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = encodeFailed
	}
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// NoRoute is the answer to a request no route matched, given h, the
// handler http.ServeMux returned for it: 405 METHOD_NOT_ALLOWED when the
// path has routes for other methods (with the mux's Allow header, set on
// w), else 404 NOT_FOUND.
func NoRoute(h http.Handler, w http.ResponseWriter, r *http.Request) *Error {
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		return Errorf(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "%s is not allowed on %s", r.Method, r.URL.Path)
	}
	return Errorf(http.StatusNotFound, "NOT_FOUND", "no such endpoint: %s %s", r.Method, r.URL.Path)
}

// WithNoRoute returns a handler that serves mux's routes and answers a
// request none of them matches with [NoRoute] (404, or 405 with Allow),
// which write writes: an API's own error writer, which may also log it.
func WithNoRoute(mux *http.ServeMux, write func(http.ResponseWriter, *http.Request, *Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == "" {
			write(w, r, NoRoute(h, w, r))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// statusProbe records the status and headers a handler writes, and drops
// the body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }
