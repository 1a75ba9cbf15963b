// Package logtest captures what code under test logs, for tests that
// check a log line: a buffer that concurrent goroutines write to, and a
// logger over it.
package logtest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Buffer is a log sink safe for concurrent writers. The zero Buffer keeps
// everything.
type Buffer struct {
	// Max, when positive, bounds what the Buffer keeps: a write that
	// would pass it drops the older half first, so that a long test that
	// logs much keeps its newest lines.
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Max > 0 && b.b.Len()+len(p) > b.Max {
		newer := b.b.Bytes()[b.b.Len()/2:]
		b.b = *bytes.NewBuffer(append([]byte("...\n"), newer...))
	}
	return b.b.Write(p)
}

// Tail returns the last n lines.
func (b *Buffer) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
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
