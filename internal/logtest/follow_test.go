package logtest

import (
	"strings"
	"testing"
)

// TestFollow: every line is kept; the first line with the message gives
// its field, once; a line too long for the scanner ends the copy, and the
// rest is read (the writer never blocks).
func TestFollow(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		"not json",
		`{"msg":"starting"}`,
		`{"msg":"listening","addr":"127.0.0.1:1"}`,
		`{"msg":"listening","addr":"127.0.0.1:2"}`,
		strings.Repeat("x", 2<<20),
		`{"msg":"after the long line"}`,
	}, "\n")
	var b Buffer
	found := make(chan string, 1)
	Follow(strings.NewReader(in), &b, "listening", "addr", found)
	if got := <-found; got != "127.0.0.1:1" {
		t.Errorf("found %q, want the first line's address", got)
	}
	if len(found) != 0 {
		t.Error("a second value was sent")
	}
	want := "not json\n" + `{"msg":"starting"}` + "\n" + `{"msg":"listening","addr":"127.0.0.1:1"}` + "\n" + `{"msg":"listening","addr":"127.0.0.1:2"}` + "\n"
	if b.String() != want {
		t.Errorf("kept %q, want %q", b.String(), want)
	}
}
