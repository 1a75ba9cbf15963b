// Package panics contains a panic to the piece of work that caused it:
// [Call] runs a function and turns its panic into an [Error] that keeps the
// panic's value and stack, so that one bad event, action, tree or request
// fails alone and the process goes on.
//
// Containing a panic is right only where the work that panicked shares no
// state left half-changed with the rest: an event's evaluation, an
// action, the compilation of a tree, an HTTP handler. Everywhere else a
// panic should stop the process.
package panics

import (
	"fmt"
	"runtime/debug"
)

// Error is a contained panic.
type Error struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, for the log.
	Stack []byte
}

func (e *Error) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic's value when it is an error.
func (e *Error) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Call runs fn and returns its error, or an *Error when it panics.
func Call(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Recovered(v)
		}
	}()
	return fn()
}

// Recovered returns the *Error of a panic's value, with the stack of the
// goroutine calling it. It is for a deferred function that recovers
// itself, where a closure for Call would cost an allocation on a hot path:
//
//	defer func() {
//		if v := recover(); v != nil {
//			err = panics.Recovered(v)
//		}
//	}()
func Recovered(v any) *Error {
	return &Error{Value: v, Stack: debug.Stack()}
}
