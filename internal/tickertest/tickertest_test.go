package tickertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: f runs again and again until stop, not after it returned,
// and stop may be called twice.
func TestEvery(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	ran := make(chan struct{}, 1)
	stop := Every(t, time.Millisecond, func(ctx context.Context) {
		calls.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	for range 3 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("f not called within 10s")
		}
	}
	stop() // returns once the goroutine did: no call can follow
	n := calls.Load()
	stop()
	if n < 3 {
		t.Errorf("%d calls, want at least 3", n)
	}
	if got := calls.Load(); got != n {
		t.Errorf("%d calls after stop, want %d", got, n)
	}
}
