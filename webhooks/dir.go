package webhooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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

	set := make(map[string]*Webhook)
	from := make(map[string]string) // id → file that defined it
	var problems []FileError
	for _, e := range entries { // sorted by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		w, err := loadFile(root, name, src)
		if errors.Is(err, errNotRegular) {
			continue
		}
		if err == nil {
			if first, dup := from[w.ID]; dup {
				err = &ValidationError{Field: "id", Value: w.ID, Err: fmt.Errorf("duplicate id, already defined in %s", first)}
			}
		}
		if err != nil {
			problems = append(problems, FileError{Name: name, Err: err})
			continue
		}
		set[w.ID] = w
		from[w.ID] = name
	}
	return set, problems, nil
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
