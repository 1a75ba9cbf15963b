package webhooks

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/squallhq/squall/internal/jsonlimit"
)

// Sentinel errors. Match them with [errors.Is].
var (
	// ErrRequired reports a missing or empty required field.
	ErrRequired = errors.New("required")

	// ErrBodyNotJSON reports a request body that is not exactly one valid
	// JSON value in valid UTF-8. The intake answers 400 Bad Request.
	ErrBodyNotJSON = errors.New("request body is not valid JSON")

	// ErrEventType reports an event_type expression that did not evaluate
	// to a non-empty string. It is always wrapped in a [*TemplateError],
	// so the intake answers 422 Unprocessable Content.
	ErrEventType = errors.New("event_type must evaluate to a non-empty string")

	// ErrEventTooDeep reports a body whose event would nest deeper than
	// jsonlimit.MaxEventDepth, which the engines do not evaluate. The
	// intake answers 400 Bad Request.
	ErrEventTooDeep = fmt.Errorf("the event would nest deeper than %d levels", jsonlimit.MaxEventDepth)
)

var errEmpty = errors.New("must not be empty")

// maxErrorText bounds the text of wrapped errors that may quote request data
// (go-jmespath prints whole argument values in its type errors).
const maxErrorText = 200

// ValidationError reports an invalid field of a webhook file. Field is the
// JSON path of the field, such as "collector_config.payload.ref". Value is the
// offending value when it is safe and useful to show it (never a token or a
// secret), else empty.
type ValidationError struct {
	Field string
	Value string
	Err   error
}

// Error implements error.
func (e *ValidationError) Error() string {
	s := e.Field
	if e.Value != "" {
		s += " " + strconv.Quote(truncate(e.Value, 64))
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ValidationError) Unwrap() error { return e.Err }

// TemplateError reports a collector template that could not be evaluated
// against a request body: a JMESPath runtime error (for example a function
// argument of the wrong type), a result that is not JSON, or an event_type
// that is not a string ([ErrEventType]). The body was valid JSON, so the
// intake answers 422 Unprocessable Content.
type TemplateError struct {
	// Field is the JSON path of the template entry, such as
	// "collector_config.payload.ref".
	Field string
	Err   error
}

// Error implements error. Text taken from the underlying error is truncated,
// because it may quote parts of the request body.
func (e *TemplateError) Error() string {
	return e.Field + ": " + truncate(e.Err.Error(), maxErrorText)
}

// Unwrap returns the underlying error.
func (e *TemplateError) Unwrap() error { return e.Err }

// FileError reports a webhook file that [LoadDir] skipped. Both FileError
// and *FileError are errors.
type FileError struct {
	// Name is the file name relative to the loaded directory.
	Name string
	Err  error
}

// Error implements error.
func (e FileError) Error() string { return e.Name + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e FileError) Unwrap() error { return e.Err }

// truncate shortens s to at most n bytes plus an ellipsis, without splitting
// a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
