// Package polltest waits in tests for a condition that no signal reports:
// the state of a real broker, socket or cluster. Code under test that can
// signal is waited on through its channels instead.
package polltest

import (
	"context"
	"testing"
	"time"
)

// Wait polls cond until it holds, and fails the test, naming what it
// waited for, if it still does not after timeout (or when the test ends).
// It polls every 5 ms at first, then less and less often, up to every
// 100 ms, so that a long wait does not take the CPU from what it waits
// for.
func Wait(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	every := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-time.After(every):
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting for %s", what)
		}
		every = min(2*every, 100*time.Millisecond)
	}
}

// Until polls cond every 20 ms until it holds (true), or d passes or ctx
// ends (false): for callers that report the failure themselves, with the
// logs of the processes they wait on.
func Until(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
