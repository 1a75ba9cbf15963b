package satellite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/satellite/internal/kafkatest"
)

// benchBody is the request body of the intake benchmarks: 106 bytes of JSON,
// as in the measurements of reference/infra-notes.md §4.3.
var benchBody = []byte(`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`)

// benchConnections is the number of concurrent connections of the load.
const benchConnections = 64

// BenchmarkIntake compares, on loopback and in one run, a plain net/http
// handler that only reads the body with the satellite's intake answering
// after Kafka's acknowledgement (acks=all, in-process kfake broker). The load
// generator keeps 64 connections busy; it reports requests per second and
// the 50th and 99th percentile latencies.
//
//	go test -run '^$' -bench BenchmarkIntake -benchtime 5s ./satellite
func BenchmarkIntake(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		})}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		b.Cleanup(func() {
			srv.Close()
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				b.Error(err)
			}
		})
		runLoad(b, "http://"+ln.Addr().String()+"/engine/webhook/event/plain?token=tok")
	})
	b.Run("intake", func(b *testing.B) {
		broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
		cfg := testConfig(b, broker.Addr, writeHooks(b, map[string]string{"plain.json": plainHook}), "")
		cfg.AckTimeout = DefaultAckTimeout
		s := start(b, cfg)
		runLoad(b, s.url+"/engine/webhook/event/plain?token=tok")
		// Calls answered from the spool rather than on Kafka's ack (only
		// when a write took longer than AckTimeout).
		b.ReportMetric(testutil.ToFloat64(s.fwd.m.forwarded.WithLabelValues(pathSpool)), "spooled")
	})
}

// runLoad posts benchBody to url b.N times over benchConnections
// connections and reports throughput and latency.
func runLoad(b *testing.B, url string) {
	transport := &http.Transport{MaxIdleConnsPerHost: benchConnections, MaxConnsPerHost: benchConnections}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	post := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", bytes.NewReader(benchBody))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, errors.New(resp.Status)
		}
		return time.Since(start), nil
	}
	// Open the connections before measuring.
	var warm sync.WaitGroup
	for range benchConnections {
		warm.Go(func() { post() })
	}
	warm.Wait()

	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.SetParallelism((benchConnections + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 256)
		for pb.Next() {
			d, err := post()
			if err != nil {
				b.Error(err)
				return
			}
			local = append(local, d)
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
