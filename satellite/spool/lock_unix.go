//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on path, failing at once when another
// process holds it.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open spool lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock spool: %w", err)
	}
	return f, nil
}
