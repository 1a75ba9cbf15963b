package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkInsertFinding64 measures 64 concurrent InsertFinding callers on
// a 3-node cluster with fsync: the group commit shares raft entries
// between them.
func BenchmarkInsertFinding64(b *testing.B) {
	const writers = 64
	leader := benchCluster(b)
	ctx := b.Context()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				f := testFinding("bench", int(i), time.Now().UnixMilli())
				f.UID = fmt.Sprintf("0192d0b4-7cde-7000-8000-%012d", i)
				t0 := time.Now()
				out, err := leader.InsertFinding(ctx, f)
				if err == nil {
					err = out.Err
				}
				if err == nil && !out.Created {
					err = fmt.Errorf("not created")
				}
				if err != nil {
					err = fmt.Errorf("insert %d: %w", i, err)
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	reportLatency(b, lat, elapsed)
}

// BenchmarkFindingsPage measures reading the newest page of 100 findings,
// unfiltered, of a tenant with many findings: an index walk, not a scan.
func BenchmarkFindingsPage(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := newTestFSM(b)
			const per = 5000
			for e := 0; e < n/per; e++ {
				fs := make([]Finding, per)
				for k := range fs {
					fs[k] = testFinding("a", e*per+k, int64(e*per+k))
				}
				fsmInsert(b, f, uint64(e+1), fs...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p, err := f.findings("a", FindingQuery{Limit: 100})
				if err != nil || len(p.Findings) != 100 || p.Total != n {
					b.Fatalf("%d findings of %d, %v", len(p.Findings), p.Total, err)
				}
			}
		})
	}
}
