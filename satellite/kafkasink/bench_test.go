package kafkasink

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/kafkatest"
)

// BenchmarkSink_WriteWithin writes records as the satellite does, one per
// call from 64 concurrent writers, to an in-process kfake broker with 6
// partitions, with keys spread over 1 partition (one tenant) or all of them
// (64 tenants). Besides ns/op and allocations per record it reports the
// records per produce request, produce requests per second, and the CPU
// time of the whole process (sink and broker together) per record.
func BenchmarkSink_WriteWithin(b *testing.B) {
	for _, keys := range []int{1, 64} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			br := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 6})
			s := newTestSink(b, br.Addr, nil)
			value := []byte(`{"body":{"id":12345,"kind":"push","repo":"acme/widgets","ref":"refs/heads/main","source":"github","ts":1700000000}}`)
			msg := func(i int) Message {
				return Message{Key: fmt.Appendf(nil, "tenant-%d", i%keys), Value: value, Headers: []Header{
					{Key: "squall-event-id", Value: []byte("0192f0e4-7b7c-7d2a-9c1e-3f4a5b6c7d8e")},
					{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
				}}
			}
			if err := s.WriteWithin(b.Context(), time.Minute, msg(0)); err != nil {
				b.Fatal(err)
			}
			var before dto.Metric
			if err := s.m.batch.Write(&before); err != nil {
				b.Fatal(err)
			}
			const writers = 64
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ReportAllocs()
			cpu0, _ := cputime.Process()
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Go(func() {
					m := msg(w)
					for next.Add(1) <= int64(b.N) {
						if err := s.WriteWithin(context.Background(), 10*time.Second, m); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			cpu1, _ := cputime.Process()
			cpu := cpu1 - cpu0
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			var after dto.Metric
			if err := s.m.batch.Write(&after); err != nil {
				b.Fatal(err)
			}
			requests := after.GetHistogram().GetSampleCount() - before.GetHistogram().GetSampleCount()
			records := after.GetHistogram().GetSampleSum() - before.GetHistogram().GetSampleSum()
			b.ReportMetric(records/float64(requests), "records/request")
			b.ReportMetric(float64(requests)/elapsed.Seconds(), "requests/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
		})
	}
}
