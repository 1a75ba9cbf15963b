package store

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/squallhq/squall/internal/benchtest"
)

// BenchmarkInsertFinding64 measures 64 concurrent InsertFinding callers on
// a 3-node cluster with fsync: the group commit shares raft entries
// between them.
func BenchmarkInsertFinding64(b *testing.B) { benchInsertFinding(b, 64) }

// BenchmarkInsertFindingFew measures 1 and 8 concurrent callers: the
// latency the group commit adds when there is little to group.
func BenchmarkInsertFindingFew(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) { benchInsertFinding(b, writers) })
	}
}

func benchInsertFinding(b *testing.B, writers int) {
	leader := benchCluster(b)
	ctx := b.Context()
	r := benchtest.Run(b, writers, func(_ int, i int64) error {
		f := testFinding("bench", int(i), time.Now().UnixMilli())
		f.UID = fmt.Sprintf("0192d0b4-7cde-7000-8000-%012d", i)
		out, err := leader.InsertFinding(ctx, f)
		if err == nil {
			err = out.Err
		}
		if err == nil && !out.Created {
			err = fmt.Errorf("not created")
		}
		return err
	})
	r.Report(b, "writes/s")
	// All three nodes' CPU, per insert.
	r.ReportCPU(b, "cpu-us/insert")
}

// BenchmarkFindingsPage measures reading a page of 100 of one tenant's N
// findings from the state file: the newest page, unfiltered (an index
// walk: its cost does not grow with N); page 100 (offset 9,900: the
// skipped keys are walked, not the records read); the first page of a
// one-hour discovery range in the middle (a seek); and the first page
// filtered by tool (half the findings match: 200 records decoded). The
// setup applies InsertFindings entries of 5,000 findings straight to the
// state machine (no raft: building 1,000,000 through the cluster would take
// minutes) and reports how long that took.
func BenchmarkFindingsPage(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := newTestFSM(b)
			const per = 5000
			start := time.Now()
			for e := 0; e < n/per; e++ {
				fs := make([]Finding, per)
				for k := range fs {
					// One finding a second, 1,000,000 s apart at most.
					fs[k] = testFinding("a", e*per+k, int64(e*per+k)*1000)
				}
				fsmInsert(b, f, uint64(e+1), fs...)
			}
			b.Logf("%d findings loaded in %s", n, time.Since(start).Round(time.Millisecond))
			b.Run("keys", func(b *testing.B) {
				// What opening the state file costs for the dedupe index:
				// reading finding_keys into memory, and the memory it takes.
				var keys *findingKeys
				var before, after runtime.MemStats
				b.ReportAllocs()
				for b.Loop() {
					keys = nil
					runtime.GC()
					runtime.ReadMemStats(&before)
					var err error
					if keys, err = readFindingKeys(f.db); err != nil || len(keys.first) != n {
						b.Fatalf("%d keys, %v", len(keys.first), err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/finding")
				runtime.KeepAlive(keys)
				fi, err := os.Stat(f.path)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size())/float64(n), "file-B/finding")
			})
			mid := int64(n/2) * 1000
			for _, q := range []struct {
				name  string
				q     FindingQuery
				total int
			}{
				{"newest", FindingQuery{Limit: 100}, n},
				{"page100", FindingQuery{Offset: 9900, Limit: 100}, n},
				{"hour", FindingQuery{FromMS: mid, ToMS: mid + 3600_000, Limit: 100}, 3600},
				{"tool", FindingQuery{ToolCode: "scan", Limit: 100}, n / 2},
			} {
				b.Run(q.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						p, err := f.findings("a", q.q)
						if err != nil || len(p.Findings) != 100 || p.Total != q.total {
							b.Fatalf("%d findings of %d, %v", len(p.Findings), p.Total, err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkRestoreFindings measures restoring a backup of 100,000
// findings into a 3-node cluster with fsync: one entry replacing the trees
// and clearing the findings, then entries of restoreChunk findings.
func BenchmarkRestoreFindings(b *testing.B) {
	const n = 100_000
	leader := benchCluster(b)
	bk := &Backup{Active: treeWith("a"), WithFindings: true, Findings: make([]Finding, n)}
	for i := range bk.Findings {
		bk.Findings[i] = testFinding(fmt.Sprintf("t%d", i%10), i, int64(i)*1000)
	}
	for b.Loop() {
		start := time.Now()
		r, err := leader.Restore(b.Context(), bk)
		if err != nil || r.Findings != n {
			b.Fatalf("restore: %+v %v", r, err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "findings/s")
	}
}

// benchLoadFinding is finding n of the load generator's shape (squall
// bench findings): a UUIDv7-like uid ascending with n, a discovery time
// 1 ms apart, a username and a SHA-256 hash unique to n.
func benchLoadFinding(n int) Finding {
	ms := int64(1_700_000_000_000 + n)
	return Finding{
		UID:    fmt.Sprintf("%08x-%04x-7%03x-8%03x-%012x", ms>>16, ms&0xffff, n&0xfff, n>>12&0xfff, n),
		Tenant: "bench", DiscoveredMS: ms, UpdatedMS: ms, MonitoredDomainID: 1, ToolCode: "squall-bench",
		ResourceURL: "https://bench.invalid/login", Username: fmt.Sprintf("squall-bench-%d@bench.invalid", n),
		Hash: fmt.Sprintf("%064x", n), HashAlgorithm: "SHA-256", State: "Unassigned",
	}
}

// BenchmarkApplyInsertFindings measures the state machine's apply of one
// InsertFindings entry of 55 findings (the mean batch of the findings
// load at 64 clients) into a state file already holding 100,000
// findings: what every master spends per entry (decoding, the dedupe
// lookups, the state-file transaction), without raft. It reports the
// CPU per finding and findings/s; the entries are encoded outside the
// timer. The ids of tools and tenants are on (feature level 6), as on
// every master of a cluster at that level.
func BenchmarkApplyInsertFindings(b *testing.B) {
	const (
		preload = 100_000
		per     = 55
	)
	f := newTestFSM(b)
	idx := uint64(0)
	// Entries of 500: larger ones make bolt's node inserts slow.
	for e := 0; e < preload/500; e++ {
		fs := make([]Finding, 500)
		for k := range fs {
			fs[k] = benchLoadFinding(e*500 + k)
		}
		idx++
		fsmInsert(b, f, idx, fs...)
	}
	idx++
	if r := fsmApply(b, f, idx, AssignIDs{}); r.Err != nil || !f.hasIDs() {
		b.Fatalf("assign ids: %+v", r)
	}
	n := preload
	entry := func() *raft.Log {
		fs := make([]Finding, per)
		for k := range fs {
			fs[k] = benchLoadFinding(n)
			n++
		}
		data, err := encodeCommand(InsertFindings{Findings: fs})
		if err != nil {
			b.Fatal(err)
		}
		idx++
		return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
	}
	const chunk = 256
	logs := make([]*raft.Log, 0, chunk)
	b.ReportAllocs()
	b.ResetTimer()
	// cpu is this process's CPU time in the loop, less the encoding's.
	start, cpu := time.Now(), -cpuTime(b)
	for i := 0; i < b.N; i++ {
		if len(logs) == 0 {
			b.StopTimer()
			cpu += cpuTime(b)
			logs = logs[:0:0]
			for range chunk {
				logs = append(logs, entry())
			}
			cpu -= cpuTime(b)
			b.StartTimer()
		}
		l := logs[0]
		logs = logs[1:]
		r, ok := f.ApplyBatch([]*raft.Log{l})[0].(Result)
		if !ok || r.Err != nil || len(r.Findings) != per || !r.Findings[per-1].Created {
			b.Fatalf("apply: %+v", r)
		}
	}
	cpu += cpuTime(b)
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*per)/elapsed.Seconds(), "findings/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*per), "cpu-us/finding")
}

// BenchmarkAssignIDs measures the apply of the AssignIDs entry that turns
// the ids of tools and tenants on in a state file holding 100,000
// findings of 10 tenants and 20 tool codes (with replace, so that each
// iteration numbers them all again): the one pass over the findings'
// index that every master makes when a cluster reaches feature level 6.
func BenchmarkAssignIDs(b *testing.B) {
	const preload = 100_000
	f := newTestFSM(b)
	idx := uint64(0)
	for e := 0; e < preload/500; e++ {
		fs := make([]Finding, 500)
		for k := range fs {
			n := e*500 + k
			fs[k] = benchLoadFinding(n)
			fs[k].Tenant, fs[k].ToolCode = fmt.Sprintf("tenant%d", n%10), fmt.Sprintf("tool%d", n%20)
		}
		idx++
		fsmInsert(b, f, idx, fs...)
	}
	b.ResetTimer()
	for range b.N {
		idx++
		if r := fsmApply(b, f, idx, AssignIDs{Replace: true}); r.Err != nil {
			b.Fatalf("assign ids: %+v", r)
		}
	}
	b.StopTimer()
	ids, err := f.readIDs()
	if err != nil || len(ids.Tools) != 20 || len(ids.Tenants) != 10 {
		b.Fatalf("ids %+v %v", ids, err)
	}
}
