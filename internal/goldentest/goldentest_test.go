package goldentest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "case.golden.json")
	// -update creates the folder and writes got, trimmed, with one newline.
	Check(t, path, []byte("\n  {\"a\": 1}  \n\n"), true)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "{\"a\": 1}\n" {
		t.Fatalf("golden file %q", b)
	}
	// The same output with other surrounding white space matches.
	r := &recorder{TB: t}
	Check(r, path, []byte(`{"a": 1}`), false)
	if len(r.errors) != 0 {
		t.Errorf("same output: %q", r.errors)
	}
	// Another output fails without touching the file.
	Check(r, path, []byte(`{"a": 2}`), false)
	if len(r.errors) != 1 {
		t.Fatalf("differing output: %q", r.errors)
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Errorf("golden file rewritten without update: %q", b2)
	}
}
