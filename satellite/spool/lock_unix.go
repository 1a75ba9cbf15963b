//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockWait bounds how long lockDir retries a lock that is taken. A lock
// can look taken for a moment when it is not: a process that forks (Go's
// os/exec, a test starting a helper process) shares every open file of
// its parent, this lock's included, until the child's exec closes them,
// so a spool closed and opened again in that window finds its own lock
// still held. A lock another squall holds stays held: ErrLocked after
// lockWait.
const lockWait = time.Second

// lockDir takes an exclusive flock(2) on path, failing with ErrLocked when
// another process still holds it after lockWait.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open spool lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock spool: %w", err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, ErrLocked
		}
		time.Sleep(pause)
	}
}
