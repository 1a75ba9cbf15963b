package backtest

import (
	"context"
	"runtime"
	"time"

	"github.com/squallhq/squall/internal/cputime"
)

// cpuWindow is the CPU time a backtest spends before it checks its
// budget: it then pauses long enough for its share of the window's time to
// be at most the budget.
const cpuWindow = 10 * time.Millisecond

// cpuCheckEvery is how many events run between two readings of the
// thread's CPU time (a system call).
const cpuCheckEvery = 16

// cpuBudget bounds the CPU time of the goroutine that runs a backtest to
// a share of one core. The goroutine is locked to its OS thread, whose CPU
// time (reading Kafka, decoding, evaluating, counting) it reads; where the
// platform does not report a thread's CPU time, the wall time counts as
// CPU, which bounds the CPU time too (more than needed).
type cpuBudget struct {
	share    float64
	thread   bool
	cpu0     time.Duration
	wall0    time.Time
	n        int
	unlocked func()
}

// newCPUBudget starts a budget of share (0 < share < 1) of one core on
// the calling goroutine; stop releases its thread.
func newCPUBudget(share float64) *cpuBudget {
	runtime.LockOSThread()
	b := &cpuBudget{share: share, unlocked: runtime.UnlockOSThread}
	b.cpu0, b.thread = cputime.Thread()
	b.wall0 = time.Now()
	return b
}

func (b *cpuBudget) stop() { b.unlocked() }

// used returns the CPU time of the window so far.
func (b *cpuBudget) used(now time.Time) time.Duration {
	if b.thread {
		if c, ok := cputime.Thread(); ok {
			return c - b.cpu0
		}
	}
	return now.Sub(b.wall0)
}

// tick is called after each event: once the window used cpuWindow of
// CPU, it waits until that is share of the window's wall time, and starts
// the next window. It returns ctx's error when ctx ends while it waits.
func (b *cpuBudget) tick(ctx context.Context) error {
	if b.n++; b.n < cpuCheckEvery {
		return nil
	}
	b.n = 0
	now := time.Now()
	used := b.used(now)
	if used < cpuWindow {
		return nil
	}
	if wait := time.Duration(float64(used)/b.share) - now.Sub(b.wall0); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	b.cpu0, _ = cputime.Thread()
	b.wall0 = time.Now()
	return nil
}
