package webhooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadDir parses every webhook file of dir and returns the valid webhooks by
// id, plus one [FileError] per file it skipped.
//
// A webhook file is a regular file (or a symbolic link to one) directly in
// dir whose name ends in ".json" and does not start with "."; other entries,
// hidden ones and subdirectories included, are ignored. This matches the
// Kubernetes ConfigMap volume layout, where each visible name is a symbolic
// link through the hidden "..data" link. Files are opened through an
// [os.Root], so a link that leads outside dir is reported, never followed.
//
// Files are handled in name order. A file that cannot be read or parsed, or
// whose id an earlier file already uses, is skipped and reported; it never
// prevents the others from loading. The returned error is non-nil only when
// dir itself cannot be read; the map is then nil.
//
// Token and secret entries with a relative "file" are read from dir; "env"
// entries from the process environment. A secret file that group or others
// may read skips its webhook file, with [ErrSecretFileMode].
func LoadDir(dir string) (map[string]*Webhook, []FileError, error) {
	return LoadDirWith(dir, osSource(dir))
}

// LoadDirWith is [LoadDir] with the "file" and "env" entries of tokens and
// secrets resolved by src; an empty src.Dir is dir.
func LoadDirWith(dir string, src Source) (map[string]*Webhook, []FileError, error) {
	if src.Dir == "" {
		src.Dir = dir
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open webhook directory: %w", err)
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, nil, fmt.Errorf("read webhook directory: %w", err)
	}

	l := newLoader()
	for _, e := range entries { // sorted by name
		name := e.Name()
		if !IsWebhookFileName(name) {
			continue
		}
		w, err := loadFile(root, name, src)
		if errors.Is(err, errNotRegular) {
			continue
		}
		l.add(name, w, err)
	}
	return l.set, l.problems, nil
}

// IsWebhookFileName reports whether [LoadDir] reads a file of this name:
// it ends in ".json" and does not start with ".".
func IsWebhookFileName(name string) bool {
	return !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".json")
}

// LoadFiles parses the webhook files at paths as [LoadDir] parses the
// files of a directory, each as if it were in a directory of its own
// (relative "file" entries start from its directory), and reports the
// same problems: one [FileError] per file it would skip, Name the path
// as given, and a file whose id an earlier one uses. It also reports a
// file that LoadDir would not read: a name that [IsWebhookFileName]
// refuses, or not a regular file. The valid webhooks are returned by path.
func LoadFiles(paths []string, lookupEnv func(string) (string, bool)) (map[string]*Webhook, []FileError) {
	l := newLoader()
	for _, path := range paths {
		dir, name := filepath.Split(path)
		if dir == "" {
			dir = "."
		}
		if !IsWebhookFileName(name) {
			l.add(path, nil, &ValidationError{Field: "(file)", Value: name, Err: errors.New(`not loaded: a webhook file's name ends in ".json" and does not start with "."`)})
			continue
		}
		w, err := loadFileIn(dir, name, Source{Dir: dir, LookupEnv: lookupEnv})
		if errors.Is(err, errNotRegular) {
			err = &ValidationError{Field: "(file)", Err: fmt.Errorf("not loaded: %w", err)}
		}
		l.add(path, w, err)
	}
	byPath := make(map[string]*Webhook, len(l.set))
	for id, path := range l.from {
		byPath[path] = l.set[id]
	}
	return byPath, l.problems
}

// loadFileIn parses the file name of dir as LoadDir does.
func loadFileIn(dir, name string, src Source) (*Webhook, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return loadFile(root, name, src)
}

// loader collects the webhooks of a load and its problems.
type loader struct {
	set      map[string]*Webhook
	from     map[string]string // id → file that defined it
	problems []FileError
}

func newLoader() *loader {
	return &loader{set: make(map[string]*Webhook), from: make(map[string]string)}
}

// add records the outcome of loading file name: w, or err; a webhook
// whose id an earlier file defined is a problem.
func (l *loader) add(name string, w *Webhook, err error) {
	if err == nil && w != nil {
		if first, dup := l.from[w.ID]; dup {
			err = &ValidationError{Field: "id", Value: w.ID, Err: fmt.Errorf("duplicate id, already defined in %s", first)}
		}
	}
	if err != nil {
		l.problems = append(l.problems, FileError{Name: name, Err: err})
		return
	}
	if w != nil {
		l.set[w.ID] = w
		l.from[w.ID] = name
	}
}

var errNotRegular = errors.New("not a regular file")

// loadFile parses one file of root, following symbolic links inside root.
// It checks the type before opening, so that a FIFO cannot block it.
func loadFile(root *os.Root, name string, src Source) (*Webhook, error) {
	info, err := root.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseWith(f, src)
}
