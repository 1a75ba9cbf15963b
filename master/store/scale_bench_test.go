package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// fileSink is a raft.SnapshotSink writing to a file.
type fileSink struct{ *os.File }

func (s fileSink) ID() string    { return "file" }
func (s fileSink) Cancel() error { return s.Close() }

// scaleFindingsMax is the largest size BenchmarkScaleFindings runs:
// SQUALL_SCALE_FINDINGS_MAX, 1,000,000 by default (10,000,000 needs some
// 10 GB of disk and a long while).
func scaleFindingsMax(b *testing.B) int {
	if s := os.Getenv("SQUALL_SCALE_FINDINGS_MAX"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("SQUALL_SCALE_FINDINGS_MAX: %v", err)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkScaleFindings is the findings curve of docs/BENCHMARKS.md. For
// each size N (10,000 to 1,000,000; SQUALL_SCALE_FINDINGS_MAX for more)
// it loads N findings of one tenant into a state machine in
// InsertFindings entries of 5,000 (no raft: the state machine's own cost)
// and reports, once per size:
//   - insert-findings/s: the load's rate, and last-findings/s: the rate
//     of the last 10% (a store holding 0.9 N);
//   - heap-MiB: the live heap once loaded (the dedupe index of keys is
//     in memory), file-MiB: the state file;
//   - snapshot-s: writing a raft snapshot of the state to a file, and
//     restore-s: a fresh state machine restoring it;
//
// then, as sub-benchmarks, the latency of a page of 100 (newest, and page
// 100) in ns/op.
//
//	go test ./master/store -run '^$' -bench BenchmarkScaleFindings -benchtime 200x
func BenchmarkScaleFindings(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000, 10_000_000} {
		if n > scaleFindingsMax(b) {
			continue
		}
		b.Run(fmt.Sprintf("findings=%d", n), func(b *testing.B) {
			base := heapNow()
			f := newTestFSM(b)
			const per = 5000
			start := time.Now()
			var lastStart time.Time
			for e := 0; e < n/per; e++ {
				if e == n/per*9/10 {
					lastStart = time.Now()
				}
				fs := make([]Finding, per)
				for k := range fs {
					fs[k] = testFinding("a", e*per+k, int64(e*per+k)*1000)
				}
				fsmInsert(b, f, uint64(e+1), fs...)
			}
			loadRate := float64(n) / time.Since(start).Seconds()
			lastRate := float64(n-n/per*9/10*per) / time.Since(lastStart).Seconds()
			heap := heapNow() - min(base, heapNow())
			fi, err := os.Stat(f.path)
			if err != nil {
				b.Fatal(err)
			}

			path := filepath.Join(b.TempDir(), "snapshot")
			t0 := time.Now()
			snap, err := f.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			out, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := snap.Persist(fileSink{out}); err != nil {
				b.Fatal(err)
			}
			snap.Release()
			snapshotTime := time.Since(t0)
			g := newTestFSM(b)
			in, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			t0 = time.Now()
			if err := g.Restore(io.NopCloser(in)); err != nil {
				b.Fatal(err)
			}
			restoreTime := time.Since(t0)
			in.Close()
			if p, err := g.findings("a", FindingQuery{Limit: 1}); err != nil || p.Total != n {
				b.Fatalf("restored %d findings of %d: %v", p.Total, n, err)
			}
			b.Logf("N=%d: insert %.0f findings/s (last 10%%: %.0f/s), heap %.1f MiB, file %.1f MiB, snapshot %s, restore %s",
				n, loadRate, lastRate, float64(heap)/(1<<20), float64(fi.Size())/(1<<20), snapshotTime.Round(time.Millisecond), restoreTime.Round(time.Millisecond))

			for _, q := range []struct {
				name string
				q    FindingQuery
			}{
				{"page=newest", FindingQuery{Limit: 100}},
				{"page=100", FindingQuery{Offset: 9900, Limit: 100}},
			} {
				b.Run(q.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						p, err := f.findings("a", q.q)
						if err != nil || len(p.Findings) != 100 {
							b.Fatalf("%d findings, %v", len(p.Findings), err)
						}
					}
					b.ReportMetric(loadRate, "insert-findings/s")
					b.ReportMetric(lastRate, "last-findings/s")
					b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
					b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
					b.ReportMetric(snapshotTime.Seconds(), "snapshot-s")
					b.ReportMetric(restoreTime.Seconds(), "restore-s")
				})
			}
		})
	}
}

// heapNow returns the live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
