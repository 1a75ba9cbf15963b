package httpguard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/panics"
)

// CodeInternal is the error code of the answer to a request whose handler
// panicked.
const CodeInternal = "INTERNAL_ERROR"

// Recover answers a request whose handler panics with a JSON 500 that
// names a request id and says nothing of the panic; the log line at error
// level carries the same id, the panic and its stack, and panics counts it
// (nil counts nothing). http.ErrAbortHandler, net/http's way to abort an
// answer quietly, passes through. A handler that panics after it started
// its answer cannot be answered again: its connection is aborted.
func Recover(h http.Handler, log *slog.Logger, counter prometheus.Counter) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		err := panics.Call(func() error {
			h.ServeHTTP(tw, r)
			return nil
		})
		var pe *panics.Error
		if !errors.As(err, &pe) {
			return
		}
		if pe.Value == http.ErrAbortHandler {
			panic(http.ErrAbortHandler)
		}
		id := NewRequestID()
		if counter != nil {
			counter.Inc()
		}
		log.Error("panic serving a request", slog.String("request_id", id), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("panic", fmt.Sprint(pe.Value)), slog.String("stack", string(pe.Stack)))
		if tw.wrote {
			panic(http.ErrAbortHandler)
		}
		WriteInternalError(w, id)
	})
}

// WriteInternalError answers 500 with the JSON error body of every role
// ({"code", "params", "message"}, docs/decisions.md decision 16) naming
// the request id under which the details were logged, and nothing else.
func WriteInternalError(w http.ResponseWriter, requestID string) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderRequestID, requestID)
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(InternalErrorBody(requestID))
}

// InternalErrorBody is the body of WriteInternalError, for servers that
// are not net/http ones.
func InternalErrorBody(requestID string) []byte {
	b, _ := json.Marshal(map[string]any{
		"code":    CodeInternal,
		"params":  map[string]string{"request_id": requestID},
		"message": "internal error: the server logged its details under request id " + requestID,
	})
	return append(b, '\n')
}

// HeaderRequestID names, in an answer, the request id its log lines carry.
const HeaderRequestID = "X-Request-Id"

// NewRequestID returns a random request id: 16 hex digits.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// trackingWriter remembers whether the answer was started.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are informational: the answer is still to come
		t.wrote = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Flush lets handlers that stream flush through the wrapper.
func (t *trackingWriter) Flush() {
	t.wrote = true
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
