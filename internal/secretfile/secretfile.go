// Package secretfile reads the files that hold secrets (token keys, join
// secrets, API token files, webhook tokens and signature secrets, findings
// keys) with one rule for who may read them: their owner only.
//
// A file that others may read is refused. A file that its group may read
// is refused too, except when another user owns it and the group is one
// of this process's groups: that is the one way a service reads a file
// that root owns (root:squall 0440, and every Kubernetes Secret volume
// mounted with an fsGroup, which adds group read to every file).
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ErrMode reports a secret file that users other than its owner may read.
var ErrMode = errors.New("readable by group or others")

// ModeError is the refusal of a secret file's mode: errors.Is(err,
// ErrMode) matches it.
type ModeError struct {
	Path string
	Perm fs.FileMode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%s (mode %04o): make it readable by its owner only: chmod 600 %s", ErrMode, e.Perm, e.Path)
}

// Unwrap returns ErrMode.
func (e *ModeError) Unwrap() error { return ErrMode }

// Check applies the rule to the file at path, described by info (from
// os.Stat or File.Stat): nil, or a *ModeError.
func Check(path string, info fs.FileInfo) error {
	perm := info.Mode().Perm()
	if perm&0o004 == 0 && (perm&0o040 == 0 || groupReadsForService(info)) {
		return nil
	}
	return &ModeError{Path: path, Perm: perm}
}

// Read reads a secret file: a regular file, at most max bytes, that
// passes Check; surrounding white space (a final newline) is trimmed (the
// caller checks the length it needs). Every error names the path.
func Read(path string, max int64) ([]byte, error) {
	// Check the type before opening, so that a FIFO cannot block.
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if err := Check(path, info); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}
