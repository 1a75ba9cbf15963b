package action

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Match them with [errors.Is]; they are always wrapped with
// context (the action id, the payload field, the offending path).
var (
	// ErrNoExecutor reports an action id that no executor handles. It is
	// permanent: the caller decides whether to log it or dead-letter the event.
	ErrNoExecutor = errors.New("no executor for action")

	// ErrNotEnabled reports an action of a built-in executor that the
	// configuration leaves disabled; the error says how to enable it. It
	// wraps [ErrNoExecutor], so the caller treats it the same way.
	ErrNotEnabled = fmt.Errorf("%w: executor not enabled", ErrNoExecutor)

	// ErrInvalidPayload reports a payload that does not follow its executor's
	// contract (a missing or mistyped field). It is permanent.
	ErrInvalidPayload = errors.New("invalid payload")

	// ErrPathEscape reports an archive path or a script that would lie outside
	// its configured base directory (through "..", an absolute path or a
	// symbolic link). It is permanent.
	ErrPathEscape = errors.New("path escapes its base directory")

	// ErrTooDeep reports foreach actions nested deeper than
	// foreach.max_depth. It is permanent.
	ErrTooDeep = errors.New("foreach actions nested too deep")

	// ErrClosed reports an action run after [Registry.Close].
	ErrClosed = errors.New("registry closed")
)

// Error classifies an executor failure as retriable or permanent. Executors
// return it (through [NewRetriable] and [NewPermanent]) and [Registry.Run]
// retries only retriable failures. An error that carries no Error is
// permanent: running an action twice has side effects, so it is retried only
// when its executor says it is safe and useful.
type Error struct {
	// Retriable tells whether running the action again may succeed.
	Retriable bool
	// Err is the failure.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *Error) Unwrap() error { return e.Err }

// NewRetriable marks err as retriable. It returns nil for a nil err.
func NewRetriable(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Retriable: true, Err: err}
}

// NewPermanent marks err as permanent. It returns nil for a nil err.
func NewPermanent(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

// Retriable reports whether err is a retriable failure: the outermost
// [*Error] in its chain is marked retriable. Errors without an [*Error] are
// permanent.
func Retriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// payloadError reports a payload field that breaks its executor's contract.
func payloadError(executor, field, problem string) error {
	return NewPermanent(&fieldError{executor: executor, field: field, problem: problem})
}

// fieldError is the text of a payload error; it unwraps to ErrInvalidPayload.
type fieldError struct {
	executor, field, problem string
}

func (e *fieldError) Error() string {
	return e.executor + ": " + ErrInvalidPayload.Error() + ": " + strconv.Quote(e.field) + " " + e.problem
}

func (e *fieldError) Unwrap() error { return ErrInvalidPayload }
