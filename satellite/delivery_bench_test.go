package satellite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/webhooks"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// guardedHook has every guard of issue 16 on: a Standard Webhooks
// signature with a 5-minute tolerance, dedupe on the webhook-id header
// (every call of the benchmark is a new delivery, so every call is
// written to the dedupe file), and a per-client rate limit high enough
// never to refuse, so that every call is checked against its bucket.
const guardedHook = `{"id": "guarded", "token": "tok-0123456789abc",
	"signature": {"scheme": "standard-webhooks", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
	"dedupe": {"header": "webhook-id", "window": "24h"},
	"rate_limit": {"rate": 1000000, "burst": 1000000, "per_client": true},
	"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}"}}}`

// BenchmarkIntakeGuarded compares, in one satellite and in alternating
// rounds, calls of the plain webhook (token only) with calls of a webhook
// that has a signature, dedupe and a rate limit (guardedHook). The load
// generator signs each guarded call with a new delivery id; the plain calls
// get the same headers, unsigned, so that both send the same bytes. It
// reports both rates and "ratio-%", the guarded rate as a share of the
// plain one (issue 16: at least 90%).
//
//	go test -run '^$' -bench BenchmarkIntakeGuarded -benchtime 20000x -count 5 ./satellite
func BenchmarkIntakeGuarded(b *testing.B) {
	broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	cfg := testConfig(b, broker.Addr, writeHooks(b, map[string]string{"plain.json": plainHook, "guarded.json": guardedHook}), "")
	cfg.AckTimeout = DefaultAckTimeout
	s := start(b, cfg)
	hook := webhookstest.Parse(b, guardedHook)
	var seq atomic.Int64
	request := func(id string) func() (*http.Request, error) {
		url := s.url + "/engine/webhook/event/" + id + "?token=tok-0123456789abc"
		return func() (*http.Request, error) {
			req, err := http.NewRequest("POST", url, bytes.NewReader(benchBody))
			if err != nil {
				return nil, err
			}
			msgID := fmt.Sprintf("msg_%d", seq.Add(1))
			req.Header = hook.Signature.Sign(benchBody, time.Now(), msgID)
			req.Header.Set("Content-Type", "application/json")
			return req, nil
		}
	}
	plainReq, guardedReq := request("plain"), request("guarded")
	client := newLoadClient()
	for _, mk := range []func() (*http.Request, error){plainReq, guardedReq} {
		if _, err := loadRequests(client, mk, benchConnections); err != nil {
			b.Fatal(err)
		}
	}
	const rounds = 10
	var plain, guarded loadStats
	b.ReportAllocs()
	b.ResetTimer()
	for i := range rounds {
		n := b.N / rounds
		if i < b.N%rounds {
			n++
		}
		// Alternate which goes first, so that neither always follows
		// the other's garbage.
		order := []struct {
			mk    func() (*http.Request, error)
			stats *loadStats
		}{{plainReq, &plain}, {guardedReq, &guarded}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, c := range order {
			st, err := loadRequests(client, c.mk, n)
			if err != nil {
				b.Fatal(err)
			}
			c.stats.add(st)
		}
	}
	b.StopTimer()
	if plain.elapsed == 0 || guarded.elapsed == 0 || len(plain.lat) == 0 || len(guarded.lat) == 0 {
		return
	}
	reportRatio(b, "plain", &plain, "guarded", &guarded)
	b.ReportMetric(plain.percentile(0.50), "plain-p50-ms")
	b.ReportMetric(guarded.percentile(0.50), "guarded-p50-ms")
	if got := metricValue(b, s, `squall_intake_deduplicated_total{webhook="guarded"}`); got != 0 {
		b.Errorf("%g guarded calls deduplicated: the delivery ids are not unique", got)
	}
}

// loadRequests sends n requests made by mk over benchConnections
// connections, each expected to be answered 200.
func loadRequests(client *http.Client, mk func() (*http.Request, error), n int) (loadStats, error) {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		st    loadStats
		first error
		wg    sync.WaitGroup
	)
	cpu0, cpuOK := cputime.Process()
	start := time.Now()
	for range benchConnections {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/benchConnections+1)
			var err error
			for next.Add(1) <= int64(n) {
				var req *http.Request
				if req, err = mk(); err != nil {
					break
				}
				t0 := time.Now()
				var resp *http.Response
				if resp, err = client.Do(req); err != nil {
					next.Add(int64(n))
					break
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
					next.Add(int64(n))
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			st.lat = append(st.lat, local...)
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	if cpu1, ok := cputime.Process(); ok && cpuOK {
		st.cpu = cpu1 - cpu0
	}
	return st, first
}

// hookDirectory is a fixed set of webhooks.
type hookDirectory map[string]*webhooks.Webhook

func (d hookDirectory) Lookup(id string) *webhooks.Webhook { return d[id] }

// nullSink takes every record and keeps none.
type nullSink struct{}

func (nullSink) Publish(context.Context, intake.Record) error { return nil }

// BenchmarkIntakeGuards measures the handler alone (no network, no
// Kafka: a sink that drops the records) for a webhook with a token only,
// then with each guard of issue 16, then with all of them. Every call of
// the dedupe cases is a new delivery id, written to a real dedupe file.
func BenchmarkIntakeGuards(b *testing.B) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const collector = `"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}"}}`
	sig := `"signature": {"scheme": "standard-webhooks", "secret": "` + secret + `"}`
	dd := `"dedupe": {"header": "webhook-id", "window": "24h"}`
	rl := `"rate_limit": {"rate": 1000000, "burst": 1000000, "per_client": true}`
	ips := `"allow_ips": ["127.0.0.0/8"]`
	body := []byte(`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`)
	for _, bc := range []struct{ name, extra string }{
		{"plain", ``},
		{"signature", sig + `,`},
		{"dedupe", dd + `,`},
		{"rate_limit", rl + `,`},
		{"allow_ips", ips + `,`},
		{"all", sig + `,` + dd + `,` + rl + `,` + ips + `,`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			hook := webhookstest.Parse(b, `{"id": "h", "token": "tok-0123456789abc", `+bc.extra+collector+`}`)
			signer := webhookstest.Parse(b, `{"id": "h", "token": "tok-0123456789abc", `+sig+`,`+collector+`}`).Signature
			store, err := dedupe.New(dedupe.Config{Path: filepath.Join(b.TempDir(), dedupe.FileName)}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Open(context.Background(), time.Now()); err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			in, err := intake.New(intake.Config{Source: "bench", Dedupe: store}, hookDirectory{"h": hook}, nullSink{}, nil, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			// Requests signed beforehand, each with its own delivery id.
			reqs := make([]*http.Request, b.N)
			now := time.Now()
			for i := range reqs {
				r := httptest.NewRequest("POST", "/engine/webhook/event/h?token=tok-0123456789abc", nil)
				r.Header = signer.Sign(body, now, fmt.Sprint("msg_", i))
				r.RemoteAddr = "127.0.0.1:5000"
				reqs[i] = r
			}
			w := &discardWriter{h: make(http.Header)}
			b.ReportAllocs()
			cpu0, cpuOK := cputime.Process()
			b.ResetTimer()
			for i := range b.N {
				r := reqs[i]
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				clear(w.h)
				in.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			b.StopTimer()
			// Process CPU, the dedupe writer's included: steadier than
			// the wall clock on a shared machine.
			if cpu1, ok := cputime.Process(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
