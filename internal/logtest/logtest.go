// Package logtest captures what code under test logs, for tests that
// check a log line: a buffer that concurrent goroutines write to, and a
// logger over it.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is a log sink safe for concurrent writers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// New returns a logger that writes text lines of level and above to a
// new Buffer, and the Buffer.
func New(level slog.Level) (*slog.Logger, *Buffer) {
	b := new(Buffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level})), b
}
