package benchtest

import (
	"errors"
	"sync"
	"testing"
)

// TestRun: every operation runs once, each worker keeps its number, and
// the report holds the throughput, the latencies and the CPU per operation.
func TestRun(t *testing.T) {
	var mu sync.Mutex
	var ran map[int64]int
	workers := map[int]bool{}
	res := testing.Benchmark(func(b *testing.B) {
		ran = map[int64]int{}
		r := Run(b, 4, func(w int, i int64) error {
			mu.Lock()
			defer mu.Unlock()
			ran[i]++
			workers[w] = true
			return nil
		})
		if len(r.Latencies) != b.N || len(ran) != b.N {
			b.Fatalf("%d latencies, %d operations, want %d", len(r.Latencies), len(ran), b.N)
		}
		for i, n := range ran {
			if n != 1 {
				b.Fatalf("operation %d ran %d times", i, n)
			}
		}
		r.Report(b, "ops/s")
		r.ReportCPU(b, "cpu-us/op")
	})
	if res.N == 0 {
		t.Fatal("the benchmark failed")
	}
	for w := range workers {
		if w < 0 || w >= 4 {
			t.Fatalf("worker %d of 4", w)
		}
	}
	for _, m := range []string{"ops/s", "p50-ms", "p99-ms", "cpu-us/op"} {
		if _, ok := res.Extra[m]; !ok {
			t.Fatalf("metric %s missing from %v", m, res.Extra)
		}
	}
}

// TestRun_Failure: a failing operation fails the benchmark.
func TestRun_Failure(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		Run(b, 4, func(_ int, i int64) error {
			if i == 3 {
				return errors.New("refused")
			}
			return nil
		})
	})
	if res.N != 0 {
		t.Fatalf("the benchmark passed: %v", res)
	}
}
