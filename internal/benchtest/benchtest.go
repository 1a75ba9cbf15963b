// Package benchtest runs a Go benchmark's b.N operations from concurrent
// workers and reports their throughput, latency percentiles and CPU time:
// the closed-loop load of the benchmarks of the master's writes, the
// findings API and the satellite's intake.
package benchtest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/cputime"
)

// Result is what a run measured.
type Result struct {
	// Latencies holds the latency of each operation.
	Latencies []time.Duration
	// Elapsed is the wall time of the run.
	Elapsed time.Duration
	// CPU is the CPU time the whole process used during the run.
	CPU time.Duration
}

// Run calls op(w, i) for i from 0 to b.N-1 from workers goroutines, w
// being the goroutine's number (0 to workers-1): each takes the next i
// as soon as its operation returns. The first failure stops every
// worker and fails b. The benchmark timer runs only while they do.
func Run(b *testing.B, workers int, op func(w int, i int64) error) Result {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) || failed.Load() != nil {
					return
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					err = fmt.Errorf("operation %d: %w", i, err)
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return Result{Latencies: lat, Elapsed: elapsed, CPU: cpu}
}

// Report reports the throughput as the metric rate (operations per
// second, e.g. "writes/s") and the median and 99th percentile latencies
// as p50-ms and p99-ms. It sorts r.Latencies.
func (r Result) Report(b *testing.B, rate string) {
	lat := r.Latencies
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(lat))/r.Elapsed.Seconds(), rate)
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// ReportCPU reports the process CPU time per operation, in microseconds,
// as the metric name (e.g. "cpu-us/insert").
func (r Result) ReportCPU(b *testing.B, name string) {
	if len(r.Latencies) == 0 {
		return
	}
	b.ReportMetric(float64(r.CPU.Microseconds())/float64(len(r.Latencies)), name)
}

// processCPU returns the CPU time the process has used so far (0 where
// the platform does not tell).
func processCPU() time.Duration {
	d, _ := cputime.Process()
	return d
}
