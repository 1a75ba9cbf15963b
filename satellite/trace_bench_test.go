package satellite

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/tracingtest"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// BenchmarkIntakeTracing measures the intake's handler and the forwarder,
// in process, with a Kafka that acknowledges at once (no network, no
// broker: only the code on the request path), with tracing off (no tracer
// provider: what runs without an OTLP endpoint), configured but not
// sampling, and sampling every call into a batch processor whose exporter
// drops the spans (the SDK's cost without the export's network).
//
//	go test -run '^$' -bench BenchmarkIntakeTracing -count 5 ./satellite
func BenchmarkIntakeTracing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"unsampled", sdktrace.NeverSample()},
		{"sampled", sdktrace.AlwaysSample()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchIntakeHandler(b, tracingtest.Dropping(b, bc.sampler))
		})
	}
}

func benchIntakeHandler(b *testing.B, tp trace.TracerProvider) {
	hook := webhookstest.Parse(b, plainHook)
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	acks := &stubProducer{write: func(context.Context, ...kafkasink.Message) error { return nil }}
	f := newForwarder(forwarderConfig{ackTimeout: time.Second, topic: topic}, acks, nil, slog.New(slog.DiscardHandler), m, tp)
	in, err := intake.New(intake.Config{Source: "bench", TracerProvider: tp}, hookDirectory{"plain": hook}, f, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("/engine/webhook/event/plain?token=tok-0123456789abc")
	b.ReportAllocs()
	cpu0, _ := cputime.Process()
	b.RunParallel(func(pb *testing.PB) {
		body := bytes.NewReader(benchBody)
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			body.Reset(benchBody)
			r := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}, Body: io.NopCloser(body),
				ContentLength: int64(len(benchBody))}
			r = r.WithContext(context.Background())
			clear(w.h)
			in.ServeHTTP(w, r)
		}
	})
	cpu1, ok := cputime.Process()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if ok {
		// The process's CPU per call (the span processor's goroutine
		// included): steadier than the wall time on a shared machine.
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	if n := testutil.ToFloat64(m.toKafka); n != float64(b.N) {
		b.Fatalf("%v events acknowledged, want %d", n, b.N)
	}
}
