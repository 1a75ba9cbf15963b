package satellite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/internal/kafkatest"
)

// benchBody is the request body of the intake benchmarks: 106 bytes of JSON,
// as in the measurements of reference/infra-notes.md §4.3.
var benchBody = []byte(`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`)

// benchConnections is the number of concurrent connections of the load.
const benchConnections = 64

// BenchmarkIntake compares, on loopback, a plain net/http handler that only
// reads the body with the satellite's intake answering after Kafka's
// acknowledgement (acks=all, in-process kfake broker): "intake" on the
// satellite's own server (fasthttp), "intake-nethttp" on a net/http server. The load generator
// keeps 64 connections busy. Each sub-benchmark reports requests (events)
// per second, the 50th and 99th percentile latencies, and the CPU time of
// the whole process (load generator, server and broker) per request.
//
// "ratio" runs both in the same run, in alternating rounds, so that the
// load of a shared machine weighs on both alike: it reports the intake's
// requests per second as a percentage of the plain handler's.
//
//	go test -run '^$' -bench BenchmarkIntake -benchtime 3s ./satellite
//	go test -run '^$' -bench BenchmarkIntake/ratio -benchtime 40000x ./satellite
func BenchmarkIntake(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		url := startPlain(b)
		runLoad(b, newLoadClient(), url)
	})
	b.Run("intake", func(b *testing.B) {
		s := startBenchSatellite(b)
		runLoad(b, newLoadClient(), s.url+"/engine/webhook/event/plain?token=tok-0123456789abc")
		reportSatellite(b, s)
	})
	b.Run("intake-nethttp", func(b *testing.B) {
		// The same intake on a net/http server, as the master and squall
		// dev mount it, and as the satellite served it before
		// docs/decisions.md decision 42.
		broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
		cfg := testConfig(b, broker.Addr, writeHooks(b, map[string]string{"plain.json": plainHook}), "")
		cfg.AckTimeout = DefaultAckTimeout
		cfg.HTTPAddr = ""
		s := start(b, cfg)
		url := serveNetHTTP(b, s.Handler())
		runLoad(b, newLoadClient(), url+"/engine/webhook/event/plain?token=tok-0123456789abc")
		reportSatellite(b, s)
	})
	b.Run("ratio", func(b *testing.B) {
		plainURL := startPlain(b)
		s := startBenchSatellite(b)
		intakeURL := s.url + "/engine/webhook/event/plain?token=tok-0123456789abc"
		plainClient, intakeClient := newLoadClient(), newLoadClient()
		st := interleaved(b, loadTarget{plainClient, plainURL}, loadTarget{intakeClient, intakeURL})
		plain, intake := st[0], st[1]
		if plain.elapsed == 0 || intake.elapsed == 0 {
			return
		}
		reportRatio(b, "plain", &plain, "intake", &intake)
		b.ReportMetric(plain.percentile(0.99), "plain-p99-ms")
		b.ReportMetric(intake.percentile(0.50), "intake-p50-ms")
		b.ReportMetric(intake.percentile(0.99), "intake-p99-ms")
		reportSatellite(b, s)
	})
}

// startPlain serves a plain handler that only reads the body and returns the
// URL to post to.
func startPlain(b *testing.B) string {
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	return serve(b, &http.Server{Handler: plain}) + "/engine/webhook/event/plain?token=tok-0123456789abc"
}

// serveNetHTTP serves h on a net/http server on loopback and returns its
// URL.
func serveNetHTTP(b *testing.B, h http.Handler) string {
	return serve(b, &http.Server{Handler: h, ReadHeaderTimeout: DefaultReadHeaderTimeout})
}

// serve runs srv on loopback until the benchmark ends and returns its URL.
func serve(b *testing.B, srv *http.Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	b.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			b.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

// startBenchSatellite runs a satellite writing to an in-process broker.
func startBenchSatellite(b *testing.B) *runner {
	broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	cfg := testConfig(b, broker.Addr, writeHooks(b, map[string]string{"plain.json": plainHook}), "")
	cfg.AckTimeout = DefaultAckTimeout
	return start(b, cfg)
}

// reportSatellite reports the calls answered from the spool rather than on
// Kafka's ack (only when a write took longer than AckTimeout) and the mean
// records per produce request.
func reportSatellite(b *testing.B, s *runner) {
	b.ReportMetric(testutil.ToFloat64(s.fwd.m.forwarded.WithLabelValues(pathSpool)), "spooled")
	families, err := s.reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "squall_kafka_batch_records" {
			if h := f.GetMetric()[0].GetHistogram(); h.GetSampleCount() > 0 {
				b.ReportMetric(h.GetSampleSum()/float64(h.GetSampleCount()), "records/batch")
			}
		}
	}
}

// newLoadClient returns a client keeping up to benchConnections connections.
func newLoadClient() *http.Client {
	transport := &http.Transport{MaxIdleConnsPerHost: benchConnections, MaxConnsPerHost: benchConnections}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}

// loadTarget is an endpoint a benchmark loads, with its client.
type loadTarget struct {
	client *http.Client
	url    string
}

// interleaved warms the targets up, then sends each b.N requests in all,
// in rounds that go through the targets in turn, and returns their stats
// in the order of targets. The timer runs only during the rounds.
func interleaved(b *testing.B, targets ...loadTarget) []loadStats {
	for _, t := range targets {
		if _, err := loadN(t.client, t.url, benchConnections); err != nil {
			b.Fatal(err)
		}
	}
	const rounds = 10
	stats := make([]loadStats, len(targets))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range rounds {
		n := b.N / rounds // b.N in all
		if i < b.N%rounds {
			n++
		}
		for j, t := range targets {
			st, err := loadN(t.client, t.url, n)
			if err != nil {
				b.Fatal(err)
			}
			stats[j].add(st)
		}
	}
	b.StopTimer()
	return stats
}

// reportRatio reports the rates of base and other, named baseName and name,
// other's as a percentage of base's ("ratio-%"), and, when both measured
// their CPU time, the share of base's rate a machine whose CPU is the
// bottleneck would give other ("cpu-ratio-%").
func reportRatio(b *testing.B, baseName string, base *loadStats, name string, other *loadStats) {
	b.ReportMetric(base.rate(), baseName+"-req/s")
	b.ReportMetric(other.rate(), name+"-req/s")
	b.ReportMetric(100*other.rate()/base.rate(), "ratio-%")
	if base.cpu > 0 && other.cpu > 0 {
		b.ReportMetric(100*base.cpuPerRequest()/other.cpuPerRequest(), "cpu-ratio-%")
	}
}

// loadStats describes the requests of one or more loads.
type loadStats struct {
	lat     []time.Duration
	elapsed time.Duration
	cpu     time.Duration // 0 when not measured
}

func (s *loadStats) add(o loadStats) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
	s.cpu += o.cpu
}

func (s *loadStats) rate() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

func (s *loadStats) cpuPerRequest() float64 { return s.cpu.Seconds() / float64(len(s.lat)) }

// percentile returns the latency at p, in milliseconds.
func (s *loadStats) percentile(p float64) float64 {
	slices.Sort(s.lat)
	return float64(s.lat[min(len(s.lat)-1, int(p*float64(len(s.lat))))]) / float64(time.Millisecond)
}

// loadN posts benchBody to url n times over benchConnections connections.
func loadN(client *http.Client, url string, n int) (loadStats, error) {
	return loadRequests(client, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(benchBody))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}, n)
}

// runLoad posts benchBody b.N times over benchConnections connections and
// reports throughput, latency and CPU time per request.
func runLoad(b *testing.B, client *http.Client, url string) {
	if _, err := loadN(client, url, benchConnections); err != nil { // open the connections
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	st, err := loadN(client, url, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if len(st.lat) == 0 {
		return
	}
	b.ReportMetric(st.rate(), "req/s")
	b.ReportMetric(st.percentile(0.50), "p50-ms")
	b.ReportMetric(st.percentile(0.99), "p99-ms")
	if st.cpu > 0 {
		b.ReportMetric(float64(st.cpu.Microseconds())/float64(len(st.lat)), "cpu-µs/req")
	}
}
