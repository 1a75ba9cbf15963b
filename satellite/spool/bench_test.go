package spool

import (
	"bytes"
	"context"
	"testing"
)

// BenchmarkSpoolAppend measures durable appends of 200-byte records: one
// writer (an fsync per record) and 64 concurrent writers (fsyncs shared by
// the appends that wait for them).
func BenchmarkSpoolAppend(b *testing.B) {
	payload := bytes.Repeat([]byte{'e'}, 200)
	b.Run("writers=1", func(b *testing.B) {
		s := newTestSpool(b, "", 1<<40, 64<<20)
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if err := s.Append(context.Background(), payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("writers=64", func(b *testing.B) {
		s := newTestSpool(b, "", 1<<40, 64<<20)
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		b.SetParallelism(max(1, 64/runtimeProcs()))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Append(context.Background(), payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(testFsyncs(s)/float64(b.N), "fsyncs/op")
	})
}
