package main

import "errors"

// exitError is an error that sets the exit status of the process: 1 but
// for the errors of a command that documents another status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitBadInput is the status of a command refusing its input (an
// unreadable file, an invalid tree or test file), apart from 1, which
// says that what it checked failed (squall test).
const exitBadInput = 2

// badInput marks err as a refusal of the command's input: exit status 2.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitBadInput, err: err}
}

// exitCode returns the exit status for an error of a command.
func exitCode(err error) int {
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	return 1
}
