//go:build unix

package spool

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSpool_LockHeldBriefly opens a spool whose lock another open file
// holds for a moment, as a forked child holds its parent's files until it
// execs: Open waits for it instead of failing with ErrLocked.
func TestSpool_LockHeldBriefly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 64 << 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() { opened <- s.Open(t.Context()) }()
	// Release once Open has found the lock taken (or right away: either
	// way Open must succeed).
	syscall.Flock(int(other.Fd()), syscall.LOCK_UN)
	if err := <-opened; err != nil {
		t.Fatalf("open after a brief lock: %v", err)
	}
	s.Close()
}
