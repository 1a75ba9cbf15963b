package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The histogram's buckets are log-linear, as in HdrHistogram: values below
// 2^histBits nanoseconds have a bucket each; above, every power of two is
// cut into 2^(histBits-1) buckets of equal width, so that a bucket is at
// most 1/128 (0.8%) of the values it holds wide.
const (
	histBits = 8
	histHalf = 1 << (histBits - 1)
	// histMax is the largest value told apart, about 73 minutes; longer
	// latencies count in the last bucket.
	histMax = 1<<42 - 1
	// histBuckets is the number of buckets: bucketOf(histMax) + 1.
	histBuckets = (42-histBits)*histHalf + 2*histHalf
)

// Histogram counts latencies in log-linear buckets. Record allocates
// nothing and may be called from many goroutines at once; quantiles are
// exact to the width of a bucket (at most 0.8% of the value). The zero
// value is an empty histogram.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Int64 // nanoseconds
	min    atomic.Int64 // nanoseconds + 1; 0 while empty
	max    atomic.Int64 // nanoseconds
}

// bucketOf returns the bucket of v nanoseconds, v in [0, histMax].
func bucketOf(v int64) int {
	if v < 2*histHalf {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histBits
	return e*histHalf + int(v>>e)
}

// bucketRange returns the smallest and the largest value of bucket b.
func bucketRange(b int) (lo, hi int64) {
	if b < 2*histHalf {
		return int64(b), int64(b)
	}
	e := b/histHalf - 1
	m := int64(b - e*histHalf)
	return m << e, (m+1)<<e - 1
}

// Record counts one latency; negative ones count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := min(max(int64(d), 0), histMax)
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for {
		m := h.min.Load()
		if m != 0 && m <= v+1 || h.min.CompareAndSwap(m, v+1) {
			break
		}
	}
	for {
		m := h.max.Load()
		if m >= v || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Merge adds the counts of o to h. It is meant for snapshots: values o
// records meanwhile may or may not be included.
func (h *Histogram) Merge(o *Histogram) {
	n := o.total.Load()
	if n == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.total.Add(n)
	h.sum.Add(o.sum.Load())
	if m := o.min.Load(); m != 0 && (h.min.Load() == 0 || m < h.min.Load()) {
		h.min.Store(m)
	}
	h.max.Store(max(h.max.Load(), o.max.Load()))
}

// Count returns the number of latencies recorded.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Min returns the smallest latency recorded, 0 if none.
func (h *Histogram) Min() time.Duration { return time.Duration(max(h.min.Load()-1, 0)) }

// Max returns the largest latency recorded, 0 if none.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean returns the mean latency, 0 if none.
func (h *Histogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / int64(n))
}

// Quantile returns the latency below or at which a share q (0 to 1) of the
// recorded latencies lie: the largest value of the bucket holding the
// ceil(q × count)-th smallest latency, at most Max. It returns 0 for an
// empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return h.Min()
	}
	rank := uint64(math.Ceil(min(q, 1) * float64(n)))
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(hi, h.max.Load()))
		}
	}
	return h.Max()
}
