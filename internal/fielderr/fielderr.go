// Package fielderr reports what is wrong with a configuration: every
// problem an [*Error] naming its field, all of them joined with
// [errors.Join] so that one validation reports them all.
package fielderr

import (
	"errors"
	"fmt"
	"time"
)

// Error reports an invalid field.
type Error struct {
	// Field is the field's name or path, such as "kafka" or
	// "archive.paths.one"; the error of a section names the field inside
	// it.
	Field string
	// Err is what is wrong with it.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// List collects the problems of one validation. The zero List is empty.
type List struct {
	errs []error
}

// Add records err against field; a nil err records nothing.
func (l *List) Add(field string, err error) {
	if err != nil {
		l.errs = append(l.errs, &Error{Field: field, Err: err})
	}
}

// Addf records a formatted error against field.
func (l *List) Addf(field, format string, args ...any) {
	l.errs = append(l.errs, &Error{Field: field, Err: fmt.Errorf(format, args...)})
}

// Positive records an error against field unless d is positive.
func (l *List) Positive(field string, d time.Duration) {
	if d <= 0 {
		l.Add(field, fmt.Errorf("%s must be positive", d))
	}
}

// Err returns the problems joined, nil if there are none.
func (l *List) Err() error { return errors.Join(l.errs...) }
