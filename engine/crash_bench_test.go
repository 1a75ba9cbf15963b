package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/polltest"
)

// BenchmarkCrashDuplicates measures the events an engine crash makes run
// twice: the events it finished but had not committed yet, which the next
// engine runs again. Each iteration preloads crashEvents order events
// (archive and http actions, 4 partitions, 16 tenants), runs an engine
// until half of them are processed, kills it (no drain, no last commit),
// and lets a second engine finish; duplicates are the events processed by
// both (whose archive line the archive left out as a repeat, or archived
// twice). Sub-benchmarks compare the commit right after completion
// (Config.CommitDelay) with commits only every CommitInterval (100ms) or
// CommitBatch (1000) events, with 4 workers and with 1: with several, an
// event finished behind a slower one of its partition waits for it to be
// committed, so a crash repeats it too; shorter queues (--queue-size) keep
// the workers closer together.
//
//	go test -run '^$' -bench BenchmarkCrashDuplicates -benchtime 3x ./engine
func BenchmarkCrashDuplicates(b *testing.B) {
	for _, bc := range []struct {
		workers, queue int
		delay          time.Duration
	}{
		{4, DefaultQueueSize, 0},
		{4, DefaultQueueSize, DefaultCommitDelay},
		{1, DefaultQueueSize, 0},
		{1, DefaultQueueSize, DefaultCommitDelay},
		{4, 32, DefaultCommitDelay},
	} {
		b.Run(fmt.Sprintf("workers=%d/queue=%d/commit-delay=%s", bc.workers, bc.queue, bc.delay), func(b *testing.B) {
			benchCrash(b, bc.workers, bc.queue, bc.delay)
		})
	}
}

const crashEvents = 20_000

func benchCrash(b *testing.B, workers, queue int, delay time.Duration) {
	b.ReportAllocs()
	dups := 0
	for b.Loop() {
		e := newEnv(b, 4)
		e.deploy("v1")
		e.produce(orders(crashEvents, 16)...)
		cfg := e.config()
		cfg.CommitInterval = DefaultCommitInterval
		cfg.CommitDelay = delay
		cfg.Workers = workers
		cfg.QueueSize = queue
		first := start(b, cfg)
		polltest.Wait(b, "half the events processed", processTimeout, func() bool {
			return first.counter("squall_engine_events_processed_total") >= crashEvents/2
		})
		first.kill()
		second := start(b, cfg)
		e.waitCommitted()
		// The archive writes a repeated event's line once: count the
		// lines it left out (before the engine's metrics go with it).
		dups += int(second.counter("squall_action_archive_repeats_total"))
		second.stop()
		ids := countIDs(e.archivedEvents())
		if len(ids) != crashEvents {
			b.Fatalf("%d events archived, want %d", len(ids), crashEvents)
		}
		for _, n := range ids {
			dups += n - 1
		}
	}
	b.ReportMetric(float64(dups)/float64(b.N), "duplicates/kill")
}
