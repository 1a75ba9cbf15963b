package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// repoFiles lists the repository's files: those git tracks, or, without
// git, every regular file outside .git.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			files = append(files, filepath.Join(root, filepath.FromSlash(f)))
		}
		return files
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Name() == ".git" && d.IsDir():
			return filepath.SkipDir
		case d.Type().IsRegular() && d.Name() != ".git":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
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
	var found []string
	eachRepoLine(t, root, func(rel string, n int, line string) {
		for _, s := range outside {
			if strings.Contains(line, s) {
				found = append(found, fmt.Sprintf("%s:%d: %s", rel, n, strings.TrimSpace(line)))
				break
			}
		}
	})
	if len(found) > 0 {
		t.Errorf("%d references outside the repository:\n%s", len(found), strings.Join(found, "\n"))
	}
}

// TestNoWorkDiary checks that the repository describes the product, not
// the order in which it was made: no file names a piece of work by when it
// happened (the word session followed by its number, "an earlier
// session", a work branch such as s8-kafkapath). A figure or a choice is
// named by its subject (docs/BENCHMARKS.md's sections, docs/decisions.md's
// numbers); the history is in git.
func TestNoWorkDiary(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	diary := regexp.MustCompile(`(?i)\bsessions? [0-9]+\b|\b(this|earlier|previous|next|other|later) sessions?\b|\bround (one|two|three)\b|\bs[0-9]+-[a-z]+\b`)
	var found []string
	eachRepoLine(t, root, func(rel string, n int, line string) {
		if m := diary.FindString(line); m != "" {
			found = append(found, fmt.Sprintf("%s:%d: %q in %s", rel, n, m, strings.TrimSpace(line)))
		}
	})
	if len(found) > 0 {
		t.Errorf("%d references to the order of work instead of the product:\n%s", len(found), strings.Join(found, "\n"))
	}
}

// eachRepoLine calls fn with every line (numbered from 1) of the
// repository's text files, this file excepted: the patterns the tests look
// for are written in it.
func eachRepoLine(t *testing.T, root string, fn func(rel string, n int, line string)) {
	t.Helper()
	self, err := filepath.Abs("repo_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range repoFiles(t, root) {
		if path == self {
			continue
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			fn(rel, i+1, line)
		}
	}
}
