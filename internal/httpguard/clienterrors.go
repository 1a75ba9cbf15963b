package httpguard

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultSummaryInterval is the interval of the ClientErrors summary.
const DefaultSummaryInterval = time.Minute

// ClientErrors logs client errors (4xx answers) at debug level, and a
// summary of them at info level, once per interval in which there were
// some: "client errors" with their total and their count by status and
// code. A flood of bad requests then adds one info line per interval to
// the log, not one per request. Its methods are safe for concurrent use.
type ClientErrors struct {
	logger   *slog.Logger
	interval time.Duration

	mu     sync.Mutex
	counts map[string]int
	total  int
	timer  *time.Timer
	closed bool
}

// NewClientErrors returns a ClientErrors that logs to logger (nil
// discards) with a summary per interval (DefaultSummaryInterval when zero
// or negative).
func NewClientErrors(logger *slog.Logger, interval time.Duration) *ClientErrors {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultSummaryInterval
	}
	return &ClientErrors{logger: logger, interval: interval, counts: map[string]int{}}
}

// Record logs one client error at debug level with msg and attrs, and
// counts it under its status and code for the next summary.
func (c *ClientErrors) Record(ctx context.Context, status int, code, msg string, attrs ...any) {
	if c.logger.Enabled(ctx, slog.LevelDebug) {
		c.logger.Log(ctx, slog.LevelDebug, msg, append(attrs, "status", status, "code", code)...)
	}
	key := fmt.Sprintf("%d %s", status, code)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.counts[key]++
	c.total++
	if c.timer == nil {
		c.timer = time.AfterFunc(c.interval, c.flush)
	}
}

// flush logs the summary of the errors counted since the last one.
func (c *ClientErrors) flush() {
	c.mu.Lock()
	total, counts := c.total, c.counts
	c.total, c.counts, c.timer = 0, map[string]int{}, nil
	c.mu.Unlock()
	if total == 0 {
		return
	}
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	c.logger.Info("client errors", "interval", c.interval, "total", total, "by_code", strings.Join(parts, ", "))
}

// Close logs the summary of what was counted since the last one and stops
// the timer; errors recorded afterwards are logged at debug level only.
func (c *ClientErrors) Close() {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.flush()
}
