package store

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStore_CloseDuringConsistentReads closes stores while readers call
// ConsistentRead in a loop, and checks that no goroutine of a read is left
// waiting on raft: raft answers no VerifyLeader future it accepted into its
// buffered queue just before or after it shut down.
func TestStore_CloseDuringConsistentReads(t *testing.T) {
	t.Parallel()
	const rounds, readers = 10, 4
	// A read left waiting on raft would wait forever: ctx bounds it.
	ctx := ctxTimeout(t, 30*time.Second)
	for range rounds {
		s := openReady(t, "node0")
		var wg, reading sync.WaitGroup
		reading.Add(readers)
		for range readers {
			wg.Go(func() {
				started := sync.OnceFunc(reading.Done)
				defer started()
				// Bounded: each read ends at the latest when Close shuts
				// raft down; the loop ends with the first error.
				for i := range 100_000 {
					if i == 1 {
						started() // it read once: Close may come
					}
					if err := s.ConsistentRead(ctx); err != nil {
						if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotLeader) {
							t.Errorf("read: %v", err)
						}
						return
					}
				}
			})
		}
		reading.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	// Every read returned, and Close returned: nothing of the store's may
	// still wait on raft.
	var stuck string
	waitFor(t, 5*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stuck = ""
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "store.(*Store).verifyLeader") || strings.Contains(g, "store.(*Store).waitAnswer") || strings.Contains(g, "store.await") {
				stuck = g
			}
		}
		return stuck == ""
	}, "the reads' goroutines to end")
	if stuck != "" {
		t.Fatalf("goroutine left waiting on raft:\n%s", stuck)
	}
}
