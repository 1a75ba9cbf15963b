package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogram_buckets(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	values := []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, histMax - 1, histMax}
	for range 10_000 {
		values = append(values, rng.Int64N(histMax+1)>>rng.IntN(42))
	}
	for _, v := range values {
		b := bucketOf(v)
		if b < 0 || b >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of [0, %d)", v, b, histBuckets)
		}
		lo, hi := bucketRange(b)
		if v < lo || v > hi {
			t.Fatalf("%d in bucket %d [%d, %d]", v, b, lo, hi)
		}
		if w := hi - lo; float64(w) > float64(lo)/histHalf {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its values", b, lo, hi, histHalf)
		}
	}
	// Buckets are contiguous.
	for b := 1; b < histBuckets; b++ {
		_, prevHi := bucketRange(b - 1)
		if lo, _ := bucketRange(b); lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, bucket %d ends at %d", b, lo, b-1, prevHi)
		}
	}
	if _, hi := bucketRange(histBuckets - 1); hi != histMax {
		t.Fatalf("the last bucket ends at %d, want %d", hi, histMax)
	}
}

func TestHistogram_Quantile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values func(rng *rand.Rand) time.Duration
	}{
		{"uniform 0-10ms", func(rng *rand.Rand) time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Millisecond))) }},
		{"exponential mean 2ms", func(rng *rand.Rand) time.Duration {
			return time.Duration(rng.ExpFloat64() * float64(2*time.Millisecond))
		}},
		{"bimodal 1ms and 1s", func(rng *rand.Rand) time.Duration {
			if rng.IntN(100) == 0 {
				return time.Second + time.Duration(rng.Int64N(int64(time.Millisecond)))
			}
			return time.Millisecond + time.Duration(rng.Int64N(int64(time.Microsecond)))
		}},
		{"small", func(rng *rand.Rand) time.Duration { return time.Duration(rng.Int64N(300)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(3, 4))
			var h Histogram
			exact := make([]time.Duration, 20_000)
			var sum time.Duration
			for i := range exact {
				exact[i] = tt.values(rng)
				sum += exact[i]
				h.Record(exact[i])
			}
			slices.Sort(exact)
			for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
				rank := int(float64(len(exact))*q+0.999999) - 1
				want := exact[rank]
				got := h.Quantile(q)
				// The bucket's largest value: never below the exact
				// quantile, and at most 1% above.
				if got < want || float64(got-want) > float64(want)*0.01+1 {
					t.Errorf("Quantile(%v) = %d, exact %d", q, got, want)
				}
			}
			if h.Count() != uint64(len(exact)) || h.Min() != exact[0] || h.Max() != exact[len(exact)-1] ||
				h.Mean() != sum/time.Duration(len(exact)) {
				t.Errorf("count %d min %d max %d mean %d, want %d %d %d %d", h.Count(), h.Min(), h.Max(), h.Mean(),
					len(exact), exact[0], exact[len(exact)-1], sum/time.Duration(len(exact)))
			}
		})
	}
}

func TestHistogram_Merge(t *testing.T) {
	t.Parallel()
	var a, b, all, merged Histogram
	if merged.Quantile(0.5) != 0 || merged.Min() != 0 || merged.Max() != 0 || merged.Mean() != 0 {
		t.Fatal("an empty histogram reports non-zero values")
	}
	for i := range 1000 {
		d := time.Duration(i) * 7 * time.Microsecond
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	merged.Merge(&b)
	merged.Merge(&a)
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if merged.Quantile(q) != all.Quantile(q) {
			t.Errorf("Quantile(%v): merged %d, recorded together %d", q, merged.Quantile(q), all.Quantile(q))
		}
	}
	if merged.Count() != all.Count() || merged.Min() != all.Min() || merged.Max() != all.Max() || merged.Mean() != all.Mean() {
		t.Error("merged count, min, max or mean differ")
	}
}

func TestHistogram_extremes(t *testing.T) {
	t.Parallel()
	var h Histogram
	h.Record(-time.Second)
	h.Record(100 * time.Hour)
	if h.Min() != 0 || h.Max() != histMax || h.Quantile(1) != histMax {
		t.Errorf("min %d max %d, want 0 and %d", h.Min(), h.Max(), int64(histMax))
	}
}

func TestHistogram_RecordAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234 * time.Microsecond) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func BenchmarkHistogram_Record(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	d := time.Duration(0)
	for b.Loop() {
		d += 997
		h.Record(d & (1<<30 - 1))
	}
}
