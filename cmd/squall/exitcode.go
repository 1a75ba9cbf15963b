package main

// exitBadInput is the status of a command refusing its input (an
// unreadable file, an invalid tree or test file), apart from 1, which
// says that what it checked failed (squall test).
const exitBadInput = 2

// badInput marks err as a refusal of the command's input: exit status 2.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &exitCodeError{code: exitBadInput, err: err}
}
