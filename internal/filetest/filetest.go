// Package filetest writes the files a test's configuration points to
// (keys, tokens, passwords, settings) and finds what the program under
// test wrote in its files.
package filetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes content to the file name in dir, readable by its owner
// only, and returns its path; an error fails the test.
func Write(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
