package intake

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// Defaults of the intake's bounds (Config.MaxCalls, Config.MaxPendingBytes).
const (
	DefaultMaxCalls        = 1024
	DefaultMaxPendingBytes = 64 << 20
)

// CodeOverloaded is the code of the 503 answer to a call over one of the
// intake's bounds: calls in progress (Config.MaxCalls), bytes held for
// Kafka (Config.MaxPendingBytes) or, on the server of [Intake.NewServer],
// connections (ServerConfig.MaxConns).
const CodeOverloaded = "OVERLOADED"

// budget counts the bytes that calls in progress hold, up to max. A call
// takes its bytes before it allocates them and gives them back once
// answered. It is safe for concurrent use.
type budget struct {
	max  int64
	used atomic.Int64
}

// take adds n bytes for a call that holds held bytes already, and reports
// whether it could: the total stays within max, or the call holds all the
// bytes counted (a call alone always goes on, whatever its size).
func (b *budget) take(held, n int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > b.max && cur != held {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// give returns n bytes.
func (b *budget) give(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// overCalls is the answer to a call over Config.MaxCalls.
func (in *Intake) overCalls() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: CodeOverloaded, retryAfter: in.cfg.RetryAfter,
		params:  map[string]any{"max_calls": in.cfg.MaxCalls},
		message: fmt.Sprintf("the intake is handling %d calls, its bound: retry later", in.cfg.MaxCalls)}
}

// overBytes is the answer to a call whose body or event would take the
// bytes held for Kafka over Config.MaxPendingBytes.
func (in *Intake) overBytes() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: CodeOverloaded, retryAfter: in.cfg.RetryAfter,
		params:  map[string]any{"max_pending_bytes": in.cfg.MaxPendingBytes},
		message: fmt.Sprintf("the events waiting for Kafka hold %d bytes, the intake's bound: retry later", in.cfg.MaxPendingBytes)}
}
