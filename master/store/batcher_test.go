package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeRaft is a findingBatcher's apply that holds each batch until the
// test answers it, so that a test decides when a batch is in raft.
type fakeRaft struct {
	batches chan fakeBatch
}

type fakeBatch struct {
	items []Finding
	at    time.Time // when it was submitted
	done  chan struct{}
}

// newTestBatcher returns a batcher whose batches are handed to the
// returned fakeRaft.
func newTestBatcher(t *testing.T) (*findingBatcher, *fakeRaft) {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRaft{batches: make(chan fakeBatch, 16)}
	b := &findingBatcher{metrics: m, apply: func(ctx context.Context, items []Finding) ([]FindingOutcome, error) {
		fb := fakeBatch{items: items, at: time.Now(), done: make(chan struct{})}
		r.batches <- fb
		<-fb.done
		outs := make([]FindingOutcome, len(items))
		for i, f := range items {
			outs[i] = FindingOutcome{UID: f.UID, Created: true}
		}
		return outs, nil
	}}
	return b, r
}

// next returns the batch submitted next; synctest.Wait must show it.
func (r *fakeRaft) next(t *testing.T) fakeBatch {
	t.Helper()
	synctest.Wait()
	select {
	case fb := <-r.batches:
		return fb
	default:
		t.Fatal("no batch submitted")
		return fakeBatch{}
	}
}

// none fails if a batch was submitted.
func (r *fakeRaft) none(t *testing.T) {
	t.Helper()
	synctest.Wait()
	select {
	case fb := <-r.batches:
		t.Fatalf("a batch of %d submitted", len(fb.items))
	default:
	}
}

// inserts starts n inserts into b, of findings first.. first+n-1, one
// after the other (each in the batch before the next starts).
func inserts(t *testing.T, wg *sync.WaitGroup, b *findingBatcher, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		wg.Go(func() {
			out, err := b.insert(context.Background(), Finding{UID: fmt.Sprint(i)})
			if err != nil || out.UID != fmt.Sprint(i) {
				t.Errorf("insert %d: %+v, %v", i, out, err)
			}
		})
		synctest.Wait()
	}
}

// TestFindingBatcher_Clocked: after a batch of 4 is answered, the open
// batch (one straggler) is submitted as soon as the 4 answered callers
// are back, at the answer's instant, not at its window's or grace's end;
// a caller that comes after it joins the next batch.
func TestFindingBatcher_Clocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r := newTestBatcher(t)
		var wg sync.WaitGroup
		b.lastSize = 4 // not one at a time
		inserts(t, &wg, b, 0, 4)
		r.none(t)
		time.Sleep(b.window()) // the window ends: nothing in raft
		a := r.next(t)
		if len(a.items) != 4 {
			t.Fatalf("first batch: %d findings, want 4", len(a.items))
		}
		inserts(t, &wg, b, 4, 1) // a straggler, while a is in raft
		close(a.done)
		synctest.Wait()
		answered := time.Now()
		inserts(t, &wg, b, 5, 3)
		r.none(t) // 3 of the 4 answered callers are back
		inserts(t, &wg, b, 8, 1)
		c := r.next(t)
		if len(c.items) != 5 || !c.at.Equal(answered) {
			t.Fatalf("clocked batch: %d findings at +%v, want 5 at once", len(c.items), c.at.Sub(answered))
		}
		inserts(t, &wg, b, 9, 1) // comes after the clocked batch
		r.none(t)
		close(c.done)
		time.Sleep(b.window()) // its window: it opened at c's submission
		d := r.next(t)
		if len(d.items) != 1 || d.at.Sub(answered) != b.window() {
			t.Fatalf("next batch: %d findings at +%v", len(d.items), d.at.Sub(answered))
		}
		close(d.done)
		wg.Wait()
	})
}

// TestFindingBatcher_ClockFloor: two callers taking turns (one answered,
// one waiting behind it) merge into one batch: the open batch already
// holds as many findings as were answered, but it waits for the answered
// caller to come back.
func TestFindingBatcher_ClockFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r := newTestBatcher(t)
		var wg sync.WaitGroup
		inserts(t, &wg, b, 0, 1) // alone
		a := r.next(t)
		inserts(t, &wg, b, 1, 1) // waits behind it
		close(a.done)
		r.none(t)
		inserts(t, &wg, b, 2, 1) // a's caller is back
		c := r.next(t)
		if len(c.items) != 2 || time.Since(a.at) != 0 {
			t.Fatalf("%d findings after %v, want 2 at once", len(c.items), time.Since(a.at))
		}
		close(c.done)
		wg.Wait()
	})
}

// TestFindingBatcher_ClockBound: when fewer callers come back than were
// answered (a client left), the grace still bounds the open batch's wait.
func TestFindingBatcher_ClockBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r := newTestBatcher(t)
		var wg sync.WaitGroup
		b.lastSize = 4
		inserts(t, &wg, b, 0, 4)
		time.Sleep(b.window())
		a := r.next(t)
		inserts(t, &wg, b, 4, 1)
		time.Sleep(b.window()) // its window ends while a is in raft: late
		synctest.Wait()        // (the timer's goroutine ran)
		close(a.done)
		synctest.Wait()
		answered := time.Now()
		inserts(t, &wg, b, 5, 3) // 3 of 4 come back
		r.none(t)
		time.Sleep(b.grace())
		c := r.next(t)
		if len(c.items) != 4 || c.at.Sub(answered) != b.grace() {
			t.Fatalf("%d findings at +%v, want 4 at +%v", len(c.items), c.at.Sub(answered), b.grace())
		}
		close(c.done)
		wg.Wait()
	})
}
