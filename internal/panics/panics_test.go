package panics

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCall(t *testing.T) {
	t.Parallel()
	if err := Call(func() error { return nil }); err != nil {
		t.Errorf("no panic: %v", err)
	}
	if err := Call(func() error { return io.EOF }); err != io.EOF {
		t.Errorf("an error goes through: %v", err)
	}
	err := Call(func() error {
		var list []int
		_ = list[len(list)] // a runtime panic: index out of range
		return nil
	})
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("a panic is an *Error: %T %v", err, err)
	}
	if !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("message %q", err)
	}
	if !strings.Contains(string(pe.Stack), "panics.TestCall") {
		t.Errorf("the stack does not show where it panicked:\n%s", pe.Stack)
	}
	if err := Call(func() error { panic(io.ErrUnexpectedEOF) }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a panic with an error unwraps to it: %v", err)
	}
}
