// Package goldentest compares a test's output with a golden file.
package goldentest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got, trimmed of surrounding white space and ended by one
// newline, with the file at path; with update it first writes got there
// (creating its folder). A difference fails the test with got in full.
// The test package owns the -update flag and passes its value.
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	got = append(bytes.TrimSpace(got), '\n')
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update to accept):\n%s", path, got)
	}
}
