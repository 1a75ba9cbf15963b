package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// TestRepositoryStandsAlone checks that no file of the repository points at
// documents outside it (the design notes and specs the project was started
// from): what the code and the guide cite must be in the repository.
func TestRepositoryStandsAlone(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	outside := []string{
		"../shared/",
		"shared/spec/",
		"shared/reference/",
		"/work/",
		// The numbered decisions are docs/decisions.md; the repository has
		// no DESIGN.md at its root.
		"(DESIGN.md decision",
		" DESIGN.md decision",
		// The Tornado reference the project started from; the guide
		// (docs/rules.md, docs/migration.md) says what Squall does.
		"tornado-semantics",
	}
	self, err := filepath.Abs("repo_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" { // a directory, or a work tree's link file
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() || path == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, s := range outside {
				if strings.Contains(line, s) {
					rel, _ := filepath.Rel(root, path)
					found = append(found, fmt.Sprintf("%s:%d: %s", rel, i+1, strings.TrimSpace(line)))
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d references outside the repository:\n%s", len(found), strings.Join(found, "\n"))
	}
}
