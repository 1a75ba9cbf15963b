package intake

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Errors a [Sink] returns (wrapped) to choose the answer. Match them with
// [errors.Is].
var (
	// ErrSpoolFull means that Kafka could not take the event and the spool
	// has no room for it: 503 SPOOL_FULL with Retry-After.
	ErrSpoolFull = errors.New("spool full")
	// ErrTooLarge means that the event is larger than a Kafka record may
	// be: 413 EVENT_TOO_LARGE.
	ErrTooLarge = errors.New("event too large")
	// ErrClosed means that the satellite is shutting down: 503
	// SHUTTING_DOWN with Retry-After.
	ErrClosed = errors.New("intake closed")
)

// Error codes of the JSON error bodies.
const (
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeNotFound         = "WEBHOOK_NOT_FOUND"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeBadSignature     = "INVALID_SIGNATURE"
	// CodeBadSignatureHeader: a signature, timestamp or message-id header
	// too long or unparsable (400).
	CodeBadSignatureHeader = "INVALID_SIGNATURE_HEADER"
	// CodeSignatureTimestamp: a signature that matches but whose timestamp
	// is outside the webhook's tolerance, a replay (401).
	CodeSignatureTimestamp = "SIGNATURE_TIMESTAMP_OUT_OF_TOLERANCE"
	CodePayloadTooLarge    = "PAYLOAD_TOO_LARGE"
	CodeEventTooLarge      = "EVENT_TOO_LARGE"
	CodeBodyNotJSON        = "BODY_NOT_JSON"
	// CodeEventTooDeep: the event would nest deeper than the engines
	// evaluate (jsonlimit.MaxEventDepth).
	CodeEventTooDeep = "EVENT_TOO_DEEP"
	CodeTemplate     = "TEMPLATE_ERROR"
	CodeSpoolFull    = "SPOOL_FULL"
	CodeShuttingDown = "SHUTTING_DOWN"
	CodeUnavailable  = "UNAVAILABLE"
	CodeInternal     = "INTERNAL"
)

// Reasons of the squall_intake_refused_total metric: why a call to a known
// webhook was refused.
const (
	ReasonToken     = "token"
	ReasonSignature = "signature"
	ReasonTimestamp = "timestamp"
	// ReasonDepth counts bodies whose event would be too deep.
	ReasonDepth = "depth"
)

// apiError is an answer other than 200: the status, the JSON body
// {"code", "params", "message"} (DESIGN decision 16), and the cause to log.
type apiError struct {
	status     int
	code       string
	params     map[string]any
	message    string
	retryAfter time.Duration
	// reason, when set, counts the answer in squall_intake_refused_total.
	reason string
	err    error
}

// Error implements error.
func (e *apiError) Error() string {
	if e.err != nil {
		return e.code + ": " + e.message + ": " + e.err.Error()
	}
	return e.code + ": " + e.message
}

// Unwrap returns the cause.
func (e *apiError) Unwrap() error { return e.err }

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Code    string         `json:"code"`
	Params  map[string]any `json:"params"`
	Message string         `json:"message"`
}

// headerSetter sets a header of an answer; http.Header and fasthttp's
// response header are ones.
type headerSetter interface {
	Set(key, value string)
}

// setHeaders sets the headers of the answer e other than Content-Type and
// Content-Length: Retry-After, Allow.
func (e *apiError) setHeaders(h headerSetter) {
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	if e.status == http.StatusMethodNotAllowed {
		h.Set("Allow", http.MethodPost)
	}
}

// body returns the JSON body of the answer e, with a final newline.
func (e *apiError) body() []byte {
	params := e.params
	if params == nil {
		params = map[string]any{}
	}
	b, err := json.Marshal(errorBody{Code: e.code, Params: params, Message: e.message})
	if err != nil {
		b = []byte(`{"code":"INTERNAL","params":{},"message":"encode answer"}`)
	}
	return append(b, '\n')
}
