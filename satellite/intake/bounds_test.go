package intake

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/satellite/internal/floodtest"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

func TestBudget_Take(t *testing.T) {
	t.Parallel()
	b := budget{max: 100}
	steps := []struct {
		name      string
		held, n   int64
		want      bool
		wantTotal int64
	}{
		{"alone, over the bound", 0, 150, true, 150},
		{"another call over", 0, 1, false, 150},
		{"the call alone grows", 150, 10, true, 160},
	}
	for _, s := range steps {
		if got := b.take(s.held, s.n); got != s.want || b.used.Load() != s.wantTotal {
			t.Fatalf("%s: take(%d, %d) = %t, total %d; want %t, %d", s.name, s.held, s.n, got, b.used.Load(), s.want, s.wantTotal)
		}
	}
	b.give(160)
	if !b.take(0, 60) || !b.take(0, 40) || b.take(0, 1) {
		t.Fatalf("within the bound: total %d", b.used.Load())
	}
}

// newBoundedServer serves an Intake with cfg's bounds and sink through
// front (scfg for fasthttp).
func newBoundedServer(t *testing.T, front string, cfg Config, scfg ServerConfig, sink Sink) (*Intake, *testServer) {
	t.Helper()
	cfg.TenantID, cfg.Source, cfg.RetryAfter = "site-a", "sat-1", 7*time.Second
	in, err := New(cfg, testDirectory(t), sink, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return in, serveFront(t, front, in, satelliteMux(in), scfg)
}

// checkOverloaded fails unless a is a 503 OVERLOADED with Retry-After
// naming the bound param.
func checkOverloaded(t *testing.T, a answer, param string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.body.Code != CodeOverloaded || a.header.Get("Retry-After") != "7" {
		t.Fatalf("want 503 OVERLOADED with Retry-After 7, got %d %v %s", a.status, a.header, a.raw)
	}
	if _, ok := a.body.Params[param]; !ok {
		t.Fatalf("the answer names no %s: %s", param, a.raw)
	}
}

// TestIntake_MaxCalls: past MaxCalls calls in progress, a call is answered
// 503 OVERLOADED with Retry-After; once one ends, calls are taken again.
func TestIntake_MaxCalls(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 2)}
		in, srv := newBoundedServer(t, front, Config{MaxCalls: 2}, ServerConfig{}, sink)
		url := srv.URL + "/engine/webhook/event/plain?token=tok-0123456789abc"
		answers := make(chan answer, 2)
		for range 2 {
			go func() { answers <- call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil) }()
			<-sink.entered
		}
		checkOverloaded(t, call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil), "max_calls")
		close(sink.block)
		for range 2 {
			if a := <-answers; a.status != http.StatusOK {
				t.Fatalf("call in progress: %d %s", a.status, a.raw)
			}
		}
		sink.entered = nil
		if a := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil); a.status != http.StatusOK {
			t.Fatalf("after the calls ended: %d %s", a.status, a.raw)
		}
		if n := testutil.ToFloat64(in.m.pending); n != 0 {
			t.Fatalf("pending bytes after the calls: %v", n)
		}
	})
}

// TestIntake_MaxPendingBytes: a call whose body would take the bytes held
// for Kafka over the bound is answered 503 OVERLOADED with Retry-After,
// declared or chunked; a call alone goes on whatever its size.
func TestIntake_MaxPendingBytes(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
		in, srv := newBoundedServer(t, front, Config{MaxPendingBytes: 1000}, ServerConfig{}, sink)
		url := srv.URL + "/engine/webhook/event/plain?token=tok-0123456789abc"
		body := `{"n": "` + strings.Repeat("x", 900) + `"}`
		first := make(chan answer, 1)
		go func() { first <- call(t, srv.Client(), "POST", url, strings.NewReader(body), nil) }()
		<-sink.entered // alone: taken, though over the bound
		if n := testutil.ToFloat64(in.m.pending); n < float64(2*len(body)) {
			t.Fatalf("pending bytes %v, want the body and the event, over %d", n, 2*len(body))
		}
		checkOverloaded(t, call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil), "max_pending_bytes")
		// Chunked: the webhook's limit is counted until the body is read.
		checkOverloaded(t, call(t, srv.Client(), "POST", url, io.MultiReader(strings.NewReader(`{}`)), nil), "max_pending_bytes")
		close(sink.block)
		if a := <-first; a.status != http.StatusOK {
			t.Fatalf("call in progress: %d %s", a.status, a.raw)
		}
		sink.entered = nil
		if a := call(t, srv.Client(), "POST", url, io.MultiReader(strings.NewReader(`{}`)), nil); a.status != http.StatusOK {
			t.Fatalf("chunked, alone: %d %s", a.status, a.raw)
		}
		if n := testutil.ToFloat64(in.m.pending); n != 0 {
			t.Fatalf("pending bytes after the calls: %v", n)
		}
	})
}

// TestServer_MaxConns: past MaxConns open connections, the listener answers
// a new one 503 OVERLOADED with Retry-After and closes it; once a
// connection closes, a new one is served.
func TestServer_MaxConns(t *testing.T) {
	t.Parallel()
	_, srv := newBoundedServer(t, frontFastHTTP, Config{}, ServerConfig{MaxConns: 2, RetryAfter: 7 * time.Second}, &recorder{})
	req := "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	// The server has taken both once each answers a call.
	for _, c := range open {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("call on an admitted connection: %v %v", resp, err)
		}
	}
	a := rawCall(t, srv.Addr, req, true)
	var body errorBody
	if a.resp.StatusCode != http.StatusServiceUnavailable || a.resp.Header.Get("Retry-After") != "7" || !a.closed ||
		json.Unmarshal(a.body, &body) != nil || body.Code != CodeOverloaded || body.Params["max_connections"] != float64(2) {
		t.Fatalf("connection over the bound: %d %v (closed %t) %s", a.resp.StatusCode, a.resp.Header, a.closed, a.body)
	}
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := rawCall(t, srv.Addr, req, false)
		if a.resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection admitted within 10s of one closing: %d %s", a.resp.StatusCode, a.body)
		}
	}
}

// Figures of TestIntake_Flood, documented in docs/operations.md ("Bounds
// of the intake").
const (
	floodClients   = 128
	floodAttempts  = 4
	floodBodySize  = 128 << 10
	floodMaxConns  = 48
	floodMaxCalls  = 24
	floodMaxBytes  = 2 << 20
	floodHeapBound = 12 << 20 // heap in use above the baseline, after GC
)

// gatedSink is a Kafka that does not answer until released: Publish waits,
// then keeps the event ids it took.
type gatedSink struct {
	release chan struct{}
	entered chan struct{} // one per call that waits
	mu      sync.Mutex
	ids     map[string]bool
}

func (s *gatedSink) Publish(ctx context.Context, rec Record) error {
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[strings.Clone(rec.EventID)] = true
	return nil
}

// TestIntake_Flood: many clients send large bodies at once to an intake
// whose Kafka does not answer. The calls over the bounds are answered 503
// OVERLOADED with Retry-After, the heap in use stays under
// floodHeapBound, and once Kafka answers, every call answered 200 has its
// event in the sink.
//
// It is not parallel, nor are its two front ends, so that the heap is the
// flood's alone.
func TestIntake_Flood(t *testing.T) {
	for _, front := range []string{frontNetHTTP, frontFastHTTP} {
		t.Run(front, func(t *testing.T) { testFlood(t, front) })
	}
}

func testFlood(t *testing.T, front string) {
	{
		sink := &gatedSink{release: make(chan struct{}), entered: make(chan struct{}, floodClients), ids: map[string]bool{}}
		big := webhookstest.Parse(t, fmt.Sprintf(`{"id": "big", "token": "tok-0123456789abc", "max_payload_size": %d,
			"collector_config": {"event_type": "flood", "payload": {"all": "${@}"}}}`, 2*floodBodySize))
		dir := testDirectory(t)
		dir["big"] = big
		in, err := New(Config{TenantID: "site-a", Source: "sat-1", RetryAfter: 7 * time.Second, MaxCalls: floodMaxCalls,
			MaxPendingBytes: floodMaxBytes}, dir, sink, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		srv := serveFront(t, front, in, satelliteMux(in), ServerConfig{MaxConns: floodMaxConns, RetryAfter: 7 * time.Second})
		tr := &http.Transport{MaxIdleConnsPerHost: floodClients}
		defer tr.CloseIdleConnections()
		flood := floodtest.Start(&http.Client{Transport: tr, Timeout: 30 * time.Second}, floodtest.Config{
			URL:     srv.URL + "/engine/webhook/event/big?token=tok-0123456789abc",
			Clients: floodClients, Attempts: floodAttempts, BodySize: floodBodySize,
		})

		// Every client is waiting for Kafka or done: the flood's peak.
		timeout := time.After(60 * time.Second)
		done, waiting := 0, 0
		for done+waiting < floodClients {
			select {
			case <-flood.Settled():
				done++
			case <-sink.entered:
				waiting++
			case <-timeout:
				t.Fatalf("the flood did not settle within 60s: %d clients done, %d waiting for Kafka", done, waiting)
			}
		}
		peak := flood.HeapGrowth()
		pending := testutil.ToFloat64(in.m.pending)
		close(sink.release)
		acked, refused := floodtest.Tally(t, flood.Wait(), CodeOverloaded, "7")
		ok := len(acked)
		sink.mu.Lock()
		for _, id := range acked {
			if !sink.ids[id] {
				t.Errorf("event %s answered 200 is not in the sink", id)
			}
		}
		sink.mu.Unlock()
		t.Logf("%s: %d clients × %d attempts of %d KiB: %d answered 200, %d 503 OVERLOADED; at the peak %d calls waited for Kafka holding %.0f bytes; heap in use +%.1f MiB (bound %d MiB)",
			front, floodClients, floodAttempts, floodBodySize>>10, ok, refused, waiting, pending, float64(peak)/(1<<20), floodHeapBound>>20)
		if refused == 0 || ok == 0 {
			t.Errorf("%d answered 200, %d refused: want both", ok, refused)
		}
		if pending > floodMaxBytes+4*floodBodySize {
			t.Errorf("pending bytes %.0f over the bound %d and one call", pending, floodMaxBytes)
		}
		if peak > floodHeapBound {
			t.Errorf("heap in use grew by %d bytes during the flood, bound %d", peak, floodHeapBound)
		}
	}
}
