// Package tickertest runs work at a steady pace in the background of a
// test, as a client at work does: a load of writes, a member committing.
package tickertest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Every calls f every interval in a goroutine of its own, until stop is
// called or the test ends; f's context ends then. stop waits for the
// call in progress and may be called more than once.
func Every(t testing.TB, interval time.Duration, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			f(ctx)
		}
	})
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}
