package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/logtest"
)

// run builds and runs a load, failing the test on an error.
func run(t *testing.T, ctx context.Context, cfg Config) *Result {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != r.Answered+r.Errors {
		t.Errorf("sent %d, answered %d, errors %d: the counts do not add up", r.Sent, r.Answered, r.Errors)
	}
	return r
}

func TestLoad_status(t *testing.T) {
	t.Parallel()
	var served, conns atomic.Int64
	var mu sync.Mutex
	byStatus := map[int]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.RequestURI() != "/hook/x?token=secret" || string(body) != DefaultBody ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Bench") != "a: b" || r.Host != srvHost(r) {
			t.Errorf("unexpected request %s %s %q %v", r.Method, r.URL, body, r.Header)
		}
		code := http.StatusInternalServerError
		if served.Add(1)%2 == 0 {
			code = http.StatusTooManyRequests
		}
		mu.Lock()
		byStatus[code]++
		mu.Unlock()
		w.WriteHeader(code)
		io.WriteString(w, `{"code":"X","params":{},"message":"no"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	r := run(t, t.Context(), Config{URL: srv.URL + "/hook/x?token=secret", Connections: 4, Duration: time.Minute, Requests: 41,
		Timeout: 10 * time.Second, Headers: []Header{{"X-Bench", "a: b"}}})
	mu.Lock()
	defer mu.Unlock()
	if r.Sent != 41 || r.Answered != 41 || r.Non2xx != 41 || r.Errors != 0 || len(r.ErrorKinds) != 0 ||
		r.Status["500"] != uint64(byStatus[500]) || r.Status["429"] != uint64(byStatus[429]) || len(r.Status) != 2 || byStatus[500] != 21 {
		t.Errorf("result %+v, server answered %v", r, byStatus)
	}
	// Keep-alive: at most one TCP connection per connection of the load,
	// never a reconnect. (A busy machine may let three connections take
	// all 41 requests before the fourth one dials.)
	if n := conns.Load(); r.Connects != uint64(n) || n < 1 || n > 4 {
		t.Errorf("%d connects, the server saw %d connections; want the same, 1 to 4", r.Connects, n)
	}
	if strings.Contains(r.URL, "secret") || !strings.Contains(r.URL, "token=REDACTED") || r.LatencyFrom != "sent" {
		t.Errorf("URL %q, latency from %q", r.URL, r.LatencyFrom)
	}
	if r.LatencyMs.Max <= 0 || r.LatencyMs.P50 > r.LatencyMs.P99 || r.LatencyMs.P99 > r.LatencyMs.Max || r.LatencyMs.Min > r.LatencyMs.P50 {
		t.Errorf("latency %+v", r.LatencyMs)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"429: 20, 500: 21", "41 (41 not 2xx)", "0 without an answer\n", "4 connections"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, text.String())
		}
	}
	// The load generator's own CPU: the test's process served and sent
	// 41 requests, so it used some.
	if _, ok := cputime.Process(); ok {
		perAnswer := r.ClientCPUSeconds * 1e6 / float64(r.Answered)
		if r.ClientCPUSeconds <= 0 || r.ClientCPUMicrosPerAnswer <= 0 || math.Abs(r.ClientCPUMicrosPerAnswer-perAnswer) > 1 ||
			!strings.Contains(text.String(), "client CPU") {
			t.Errorf("client CPU %v s, %v µs per answer (want about %v)\n%s", r.ClientCPUSeconds, r.ClientCPUMicrosPerAnswer, perAnswer, text.String())
		}
	}
}

// srvHost returns the host the request was sent to, as the listener's
// address.
func srvHost(r *http.Request) string {
	return r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
}

// TestLoad_connectionClose checks that answers closing the connection
// make the load reconnect, without errors.
func TestLoad_connectionClose(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	r := run(t, t.Context(), Config{URL: srv.URL, Connections: 2, Duration: time.Minute, Requests: 10, Timeout: 10 * time.Second})
	// One connection per request, and possibly the first (the probe, given
	// to the first connection of the load) unused when the other
	// connection took every request first, as a busy machine may have it.
	if r.Answered != 10 || r.Status["200"] != 10 || r.Errors != 0 || r.Connects < 10 || r.Connects > 11 {
		t.Errorf("result %+v, want 10 answers on 10 (or 11) connections", r)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(c.(*net.TCPConn)) })
		}
	})
	return "http://" + ln.Addr().String() + "/"
}

// readRequest reads one request from c, or returns false.
func readRequest(br *bufio.Reader) bool {
	r, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, r.Body)
	return err == nil
}

func TestLoad_errorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		serve func(c *net.TCPConn)
		kind  string
	}{
		{"reset", func(c *net.TCPConn) {
			if readRequest(bufio.NewReader(c)) {
				c.SetLinger(0) // close with a RST
			}
		}, KindReset},
		{"closed", func(c *net.TCPConn) {
			if readRequest(bufio.NewReader(c)) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf") // cut short
			}
		}, KindClosed},
		{"malformed", func(c *net.TCPConn) {
			if readRequest(bufio.NewReader(c)) {
				io.WriteString(c, "NOT HTTP\r\n\r\n")
			}
		}, KindOther},
		{"timeout", func(c *net.TCPConn) {
			if readRequest(bufio.NewReader(c)) {
				io.Copy(io.Discard, c) // never answers, until the client gives up
			}
		}, KindTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := rawServer(t, tt.serve)
			r := run(t, t.Context(), Config{URL: url, Connections: 2, Duration: time.Minute, Requests: 6, Timeout: 300 * time.Millisecond})
			if r.Answered != 0 || r.Errors != 6 || r.ErrorKinds[tt.kind] != 6 || len(r.ErrorKinds) != 1 {
				t.Errorf("errors by kind %v, %d answers; want 6 %s", r.ErrorKinds, r.Answered, tt.kind)
			}
		})
	}
}

func TestLoad_unreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, err := New(Config{URL: "http://" + addr + "/x?token=secret", Connections: 1, Duration: time.Second, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Run(t.Context())
	if !errors.Is(err, ErrUnreachable) || r != nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Run: %v, %v; want ErrUnreachable, connection refused", r, err)
	}
}

// TestLoad_refusedLater counts the connects refused once the target went
// away in the middle of a run.
func TestLoad_refusedLater(t *testing.T) {
	t.Parallel()
	var srv *httptest.Server
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The listener closes before the first answer is written, so the
		// client's next connect (Connection: close) is refused for sure.
		once.Do(func() { srv.Listener.Close() })
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	r := run(t, t.Context(), Config{URL: srv.URL, Connections: 1, Duration: time.Minute, Requests: 20, Timeout: time.Second})
	if r.Status["200"] < 1 || r.ErrorKinds[KindConnectRefused] < 1 || r.ErrorKinds[KindConnectRefused]+r.Status["200"] != 20 {
		t.Errorf("status %v, errors %v; want answers then refused connects", r.Status, r.ErrorKinds)
	}
}

// TestLoad_interrupted checks that a run stops when its context is done,
// and counts the requests in flight as interrupted.
func TestLoad_interrupted(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 3)
	url := rawServer(t, func(c *net.TCPConn) {
		if readRequest(bufio.NewReader(c)) {
			arrived <- struct{}{}
			io.Copy(io.Discard, c)
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for range 3 {
			<-arrived
		}
		cancel()
	}()
	start := time.Now()
	r := run(t, ctx, Config{URL: url, Connections: 3, Duration: time.Minute, Timeout: time.Minute})
	if r.ErrorKinds[KindInterrupted] != 3 || r.Sent != 3 || time.Since(start) > 30*time.Second {
		t.Errorf("result %+v after %v; want 3 interrupted requests", r, time.Since(start))
	}
}

// TestLoad_rate runs a short open-loop load: every request due is sent
// or reported missed, and latencies are measured from the due times.
func TestLoad_rate(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	var progress logtest.Buffer
	r := run(t, t.Context(), Config{URL: srv.URL, Connections: 4, Rate: 200, Duration: 500 * time.Millisecond, Timeout: 10 * time.Second,
		Progress: &progress, ProgressInterval: 100 * time.Millisecond})
	if r.Scheduled != 100 || r.Sent+r.Missed != 100 || r.Answered != r.Sent || r.Status["200"] != r.Sent || r.LatencyFrom != "intended" || r.Rate != 200 {
		t.Errorf("result %+v; want 100 scheduled, each sent or missed", r)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	line := regexp.MustCompile(`^bench +\d+s +\d+\.\d req/s +\d+ answered +0 errors +p99 \d+\.\d{3} ms$`)
	if len(lines) < 2 {
		t.Errorf("%d progress lines in 500ms at 100ms intervals:\n%s", len(lines), progress.String())
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("progress line %q", l)
		}
	}
}

func TestNew_bad(t *testing.T) {
	t.Parallel()
	good := Config{URL: "http://127.0.0.1:1/", Connections: 1, Duration: time.Second, Timeout: time.Second}
	tests := []struct {
		name  string
		edit  func(c *Config)
		field string
		msg   string
	}{
		{"no host", func(c *Config) { c.URL = "http:///engine/webhook/event/x" }, "url", "has no host"},
		{"relative", func(c *Config) { c.URL = "/engine/webhook/event/x" }, "url", "scheme must be http or https"},
		{"scheme", func(c *Config) { c.URL = "ftp://example.com/" }, "url", "scheme must be http or https"},
		{"user info", func(c *Config) { c.URL = "http://u:pw@127.0.0.1/" }, "url", "carries credentials"},
		{"connections", func(c *Config) { c.Connections = 0 }, "connections", "not between 1 and 10000"},
		{"too many connections", func(c *Config) { c.Connections = MaxConnections + 1 }, "connections", "not between"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "duration", "bounded in time"},
		{"rate", func(c *Config) { c.Rate = -1 }, "rate", "negative"},
		{"requests", func(c *Config) { c.Requests = -1 }, "requests", "negative"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "timeout", "positive"},
		{"method", func(c *Config) { c.Method = "GE T" }, "method", "not a method"},
		{"body", func(c *Config) { c.Body = make([]byte, MaxBodyBytes+1) }, "body", "more than"},
		{"header name", func(c *Config) { c.Headers = []Header{{"X Y", "1"}} }, "header", "not a header name"},
		{"header value", func(c *Config) { c.Headers = []Header{{"X-Y", "1\r\nHost: evil"}} }, "header", "line break"},
		{"framing", func(c *Config) { c.Headers = []Header{{"content-length", "1"}} }, "header", "set by the load generator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tt.edit(&cfg)
			_, err := New(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("New: %v; want a %s error with %q", err, tt.field, tt.msg)
			}
		})
	}
	if _, err := New(good); err != nil {
		t.Errorf("New(good): %v", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://h:1/engine/webhook/event/x?token=s3cret": "http://h:1/engine/webhook/event/x?token=REDACTED",
		"https://u:pw@h/p?a=1&b=2#frag":                  "https://REDACTED@h/p?a=REDACTED&b=REDACTED",
		"http://h/p":                                     "http://h/p",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoad_coordinatedOmission stalls the first answer for 200 ms on the
// only connection of a 50 requests/s load: the requests that fell due
// meanwhile are charged the wait, their latency measured from their due
// time, not from when the connection could send them.
func TestLoad_coordinatedOmission(t *testing.T) {
	t.Parallel()
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			select { // the target stalls
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	r := run(t, t.Context(), Config{URL: srv.URL, Connections: 1, Rate: 50, Duration: 400 * time.Millisecond, Timeout: 10 * time.Second})
	// Due every 20 ms: the 9 requests due during the stall wait 20 to
	// 180 ms, the first 200 ms; measured from the send, only the first
	// would be slow.
	if r.Status["200"] < 10 || r.LatencyMs.Max < 200 || r.LatencyMs.P90 < 100 {
		t.Errorf("%d answers, latency %+v; want p90 ≥ 100 ms", r.Status["200"], r.LatencyMs)
	}
}
