package intake

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/webhooks"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// directory is a fixed set of webhooks.
type directory map[string]*webhooks.Webhook

func (d directory) Lookup(id string) *webhooks.Webhook { return d[id] }

// recorder is a Sink that keeps the records it takes, or fails with err.
type recorder struct {
	mu      sync.Mutex
	records []Record
	err     error
	block   chan struct{} // when set, Publish waits for it to close
	entered chan struct{} // when set, Publish signals its start
}

func (s *recorder) Publish(ctx context.Context, rec Record) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.records = append(s.records, rec)
	return nil
}

func (s *recorder) last(t *testing.T) Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		t.Fatal("no record")
	}
	return s.records[len(s.records)-1]
}

// testDirectory has "plain" (no tenant, 1 KiB limit), "signed" (HMAC), and
// "tenant" (its own tenant, an event type taken from the body).
func testDirectory(t testing.TB) directory {
	return directory{
		"plain": webhookstest.Parse(t, `{"id": "plain", "token": "tok-0123456789abc", "max_payload_size": 1024,
			"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}", "n": "${n}"}}}`),
		"signed": webhookstest.Parse(t, `{"id": "signed", "token": "tok-0123456789abc",
			"signature": {"header": "X-Hub-Signature-256", "secret": "s3cr3t", "prefix": "sha256="},
			"collector_config": {"event_type": "push", "payload": {"ref": "${ref}"}}}`),
		"tenant": webhookstest.Parse(t, `{"id": "tenant", "token": "tok-0123456789abc", "tenant_id": "acme",
			"collector_config": {"event_type": "${kind}", "payload": {}}}`),
	}
}

// newTestServer serves an Intake of testDirectory with sink on a real
// loopback listener, through front.
func newTestServer(t *testing.T, front string, sink Sink) (*Intake, *testServer) {
	t.Helper()
	return serveIntake(t, front, Config{TenantID: "site-a", Source: "sat-1", RetryAfter: 7 * time.Second}, testDirectory(t), sink)
}

// serveIntake builds an Intake of cfg, dir and sink, its metrics in a
// registry of its own, and serves its routes on a real loopback listener,
// through front.
func serveIntake(t *testing.T, front string, cfg Config, dir directory, sink Sink) (*Intake, *testServer) {
	t.Helper()
	in, err := New(cfg, dir, sink, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	return in, serveFront(t, front, in, mux, ServerConfig{})
}

type answer struct {
	status int
	header http.Header
	body   errorBody
	raw    []byte
}

func call(t *testing.T, client *http.Client, method, url string, body io.Reader, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, raw := calltest.Do(t, client.Do, req)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("error body %q is not JSON: %v", raw, err)
		}
		if a.body.Params == nil || a.body.Message == "" {
			t.Errorf("error body %s lacks params or message", raw)
		}
	}
	return a
}

func TestIntake_StatusCodes(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		signed := testDirectory(t)["signed"].Signature
		for _, tc := range []struct {
			name       string
			method     string
			path       string
			body       string
			header     http.Header
			sinkErr    error
			status     int
			code       string
			retryAfter string
		}{
			{name: "accepted", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{"n": 1}`, status: 200},
			{name: "GET", method: "GET", path: "/engine/webhook/event/plain?token=tok-0123456789abc", status: 405, code: CodeMethodNotAllowed},
			{name: "PUT", method: "PUT", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{}`, status: 405, code: CodeMethodNotAllowed},
			{name: "unknown id", path: "/engine/webhook/event/nope?token=tok-0123456789abc", body: `{}`, status: 404, code: CodeNotFound},
			{name: "no token", path: "/engine/webhook/event/plain", body: `{}`, status: 401, code: CodeUnauthorized},
			{name: "empty token", path: "/engine/webhook/event/plain?token=", body: `{}`, status: 401, code: CodeUnauthorized},
			{name: "wrong token", path: "/engine/webhook/event/plain?token=tok2", body: `{}`, status: 401, code: CodeUnauthorized},
			{name: "two tokens", path: "/engine/webhook/event/plain?token=tok-0123456789abc&token=tok-0123456789abc", body: `{}`, status: 401, code: CodeUnauthorized},
			{name: "too large", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{"x": "` + strings.Repeat("a", 1100) + `"}`, status: 413, code: CodePayloadTooLarge},
			{name: "not JSON", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{"n": `, status: 400, code: CodeBodyNotJSON},
			{name: "empty body", path: "/engine/webhook/event/plain?token=tok-0123456789abc", status: 400, code: CodeBodyNotJSON},
			{name: "two values", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{} {}`, status: 400, code: CodeBodyNotJSON},
			{name: "event type not a string", path: "/engine/webhook/event/tenant?token=tok-0123456789abc", body: `{"kind": 3}`, status: 422, code: CodeTemplate},
			{name: "event type missing", path: "/engine/webhook/event/tenant?token=tok-0123456789abc", body: `{}`, status: 422, code: CodeTemplate},
			{name: "signature ok", path: "/engine/webhook/event/signed?token=tok-0123456789abc", body: `{"ref": "main"}`,
				header: signed.Sign([]byte(`{"ref": "main"}`), time.Now(), ""), status: 200},
			{name: "signature missing", path: "/engine/webhook/event/signed?token=tok-0123456789abc", body: `{"ref": "main"}`, status: 401, code: CodeBadSignature},
			{name: "signature wrong", path: "/engine/webhook/event/signed?token=tok-0123456789abc", body: `{"ref": "main"}`,
				header: signed.Sign([]byte(`{"ref": "other"}`), time.Now(), ""), status: 401, code: CodeBadSignature},
			{name: "token checked before signature", path: "/engine/webhook/event/signed?token=no", body: `{}`, status: 401, code: CodeUnauthorized},
			{name: "spool full", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{}`, sinkErr: fmt.Errorf("x: %w", ErrSpoolFull),
				status: 503, code: CodeSpoolFull, retryAfter: "7"},
			{name: "event too large", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{}`, sinkErr: fmt.Errorf("x: %w", ErrTooLarge),
				status: 413, code: CodeEventTooLarge},
			{name: "sink closed", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{}`, sinkErr: ErrClosed,
				status: 503, code: CodeShuttingDown, retryAfter: "7"},
			{name: "sink failure", path: "/engine/webhook/event/plain?token=tok-0123456789abc", body: `{}`, sinkErr: errors.New("disk on fire"),
				status: 503, code: CodeUnavailable, retryAfter: "7"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				sink := &recorder{err: tc.sinkErr}
				_, srv := newTestServer(t, front, sink)
				method := cmpOr(tc.method, http.MethodPost)
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				a := call(t, srv.Client(), method, srv.URL+tc.path, body, tc.header)
				if a.status != tc.status || a.body.Code != tc.code {
					t.Fatalf("got %d %s, want %d %s", a.status, a.raw, tc.status, tc.code)
				}
				if got := a.header.Get("Retry-After"); got != tc.retryAfter {
					t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
				}
				if ct := a.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if tc.status == 405 && a.header.Get("Allow") != "POST" {
					t.Errorf("Allow %q", a.header.Get("Allow"))
				}
				if tc.status == 200 {
					var ok struct {
						EventID string `json:"event_id"`
					}
					if err := json.Unmarshal(a.raw, &ok); err != nil || string(a.raw) != `{"event_id":"`+ok.EventID+`"}`+"\n" {
						t.Errorf("answer %q: %v", a.raw, err)
					}
					if rec := sink.last(t); ok.EventID != rec.EventID || a.header.Get("Squall-Event-Id") != rec.EventID {
						t.Errorf("answer %s, record id %s", a.raw, rec.EventID)
					}
				} else if tc.sinkErr == nil && len(sink.records) != 0 {
					t.Errorf("a refused call reached the sink")
				}
			})
		}
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestIntake_Record(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		_, srv := newTestServer(t, front, sink)
		before := time.Now().UnixMilli()

		t.Run("shape, key and headers", func(t *testing.T) {
			body := `{"n": 12345678901234567890, "html": "<b>&</b>", "nested": {"a": [1, 2.50]}}`
			a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/plain?token=tok-0123456789abc", strings.NewReader(body), nil)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
			rec := sink.last(t)
			var ev struct {
				Type      string          `json:"type"`
				CreatedMs int64           `json:"created_ms"`
				Metadata  json.RawMessage `json:"metadata"`
				Payload   json.RawMessage `json:"payload"`
			}
			dec := json.NewDecoder(bytes.NewReader(rec.Value))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("value %s: %v", rec.Value, err)
			}
			if ev.Type != "webhook" || ev.CreatedMs < before || ev.CreatedMs > time.Now().UnixMilli() {
				t.Errorf("event %s", rec.Value)
			}
			if string(ev.Metadata) != `{"tenant_id":"site-a"}` {
				t.Errorf("metadata %s", ev.Metadata)
			}
			want := `{"all":{"html":"<b>&</b>","n":12345678901234567890,"nested":{"a":[1,2.50]}},"n":12345678901234567890,"source":"test"}`
			if string(ev.Payload) != want {
				t.Errorf("payload\n got %s\nwant %s", ev.Payload, want)
			}
			if !bytes.HasPrefix(rec.Value, []byte(`{"type":"webhook","created_ms":`)) {
				t.Errorf("field order: %s", rec.Value)
			}
			if rec.Key != "site-a" || !rec.Time.Equal(time.UnixMilli(ev.CreatedMs)) {
				t.Errorf("key %q time %v", rec.Key, rec.Time)
			}
			var keys []string
			for _, h := range rec.Headers {
				keys = append(keys, h.Key)
			}
			if got := strings.Join(keys, ","); got != "squall-event-id,traceparent,squall-webhook,squall-source" {
				t.Errorf("headers %s", got)
			}
			h := headerMap(rec)
			id, err := uuid.Parse(h[HeaderEventID])
			if err != nil || id.Version() != 7 || id.String() != rec.EventID {
				t.Errorf("event id %q (%v)", h[HeaderEventID], err)
			}
			if h[HeaderWebhook] != "plain" || h[HeaderSource] != "sat-1" {
				t.Errorf("headers %v", h)
			}
		})
		t.Run("webhook tenant", func(t *testing.T) {
			a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/tenant?token=tok-0123456789abc", strings.NewReader(`{"kind": "deploy"}`), nil)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
			rec := sink.last(t)
			if rec.Key != "acme" || !bytes.Contains(rec.Value, []byte(`"metadata":{"tenant_id":"acme"}`)) || !bytes.Contains(rec.Value, []byte(`"type":"deploy"`)) {
				t.Errorf("key %s value %s", rec.Key, rec.Value)
			}
		})
		t.Run("event ids differ and grow", func(t *testing.T) {
			var prev string
			for range 5 {
				call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/plain?token=tok-0123456789abc", strings.NewReader(`{}`), nil)
				id := sink.last(t).EventID
				if id <= prev {
					t.Fatalf("id %s after %s", id, prev)
				}
				prev = id
			}
		})
	})
}

func headerMap(rec Record) map[string]string {
	m := make(map[string]string)
	for _, h := range rec.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$`)

func TestIntake_Traceparent(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		_, srv := newTestServer(t, front, sink)
		const given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		for _, tc := range []struct {
			name       string
			header     http.Header
			keep       bool
			tracestate string
		}{
			{name: "kept", header: http.Header{"Traceparent": {given}}, keep: true},
			{name: "kept with tracestate", header: http.Header{"Traceparent": {given}, "Tracestate": {"vendor=abc,other=1"}}, keep: true, tracestate: "vendor=abc,other=1"},
			{name: "none: new trace"},
			{name: "malformed: new trace", header: http.Header{"Traceparent": {"00-xyz-00f067aa0ba902b7-01"}}},
			{name: "zero trace id: new trace", header: http.Header{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}},
			{name: "upper case: new trace", header: http.Header{"Traceparent": {strings.ToUpper(given)}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/plain?token=tok-0123456789abc", strings.NewReader(`{}`), tc.header)
				if a.status != 200 {
					t.Fatalf("%d %s", a.status, a.raw)
				}
				h := headerMap(sink.last(t))
				tp := h[HeaderTraceparent]
				if tc.keep && tp != given {
					t.Fatalf("traceparent %q, want %q", tp, given)
				}
				if !tc.keep && (tp == given || !traceparentRE.MatchString(tp) || !strings.HasSuffix(tp, "-03")) {
					t.Fatalf("new traceparent %q", tp)
				}
				if h[HeaderTracestate] != tc.tracestate {
					t.Fatalf("tracestate %q, want %q", h[HeaderTracestate], tc.tracestate)
				}
			})
		}
	})
}

// countingReader produces n bytes of a JSON string and counts what was read.
type countingReader struct {
	n, read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	left := r.n.Load() - r.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), left)
	for i := range p[:k] {
		p[i] = 'a'
	}
	r.read.Add(k)
	return int(k), nil
}

func TestIntake_SizeLimit(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		_, srv := newTestServer(t, front, sink)
		url := srv.URL + "/engine/webhook/event/plain?token=tok-0123456789abc"

		t.Run("declared length over the limit", func(t *testing.T) {
			body := &countingReader{}
			body.n.Store(64 << 20)
			req, _ := http.NewRequest("POST", url, body)
			req.ContentLength = 64 << 20
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := body.read.Load(); got > 16<<20 {
				t.Fatalf("the client could send %d bytes of a body refused at 1 KiB", got)
			}
		})
		t.Run("chunked body over the limit", func(t *testing.T) {
			body := &countingReader{}
			body.n.Store(64 << 20)
			req, _ := http.NewRequest("POST", url, io.MultiReader(body)) // length unknown: chunked
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 413 || !resp.Close {
				t.Fatalf("status %d, connection close %v", resp.StatusCode, resp.Close)
			}
			if got := body.read.Load(); got > 16<<20 {
				t.Fatalf("the server read on: the client sent %d bytes", got)
			}
		})
		t.Run("exactly the limit", func(t *testing.T) {
			body := `{"x":"` + strings.Repeat("a", 1024-8) + `"}`
			if len(body) != 1024 {
				t.Fatal(len(body))
			}
			if a := call(t, srv.Client(), "POST", url, strings.NewReader(body), nil); a.status != 200 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
		})
	})
}

func TestIntake_KeepAlive(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		_, srv := newTestServer(t, front, &recorder{})
		client := srv.Client()
		var reused []bool
		for _, path := range []string{"plain?token=tok-0123456789abc", "plain?token=tok-0123456789abc", "plain?token=wrong", "nope?token=x", "plain?token=tok-0123456789abc"} {
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST",
				srv.URL+"/engine/webhook/event/"+path, strings.NewReader(`{"n":1}`))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		for i, r := range reused[1:] {
			if !r {
				t.Fatalf("request %d opened a new connection: %v", i+1, reused)
			}
		}
	})
}

func TestIntake_Drain(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
		in, srv := newTestServer(t, front, sink)
		url := srv.URL + "/engine/webhook/event/plain?token=tok-0123456789abc"
		first := make(chan answer, 1)
		go func() { first <- call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil) }()
		<-sink.entered
		if n := testutil.ToFloat64(in.m.inflight); n != 1 {
			t.Fatalf("in flight: %v, want 1", n)
		}

		// Closed: new calls are refused, the call in progress goes on.
		in.Close()
		if a := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil); a.status != 503 || a.body.Code != CodeShuttingDown {
			t.Fatalf("call while draining: %d %s", a.status, a.raw)
		}
		drained := make(chan error, 1)
		go func() { drained <- in.Drain(context.Background()) }()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		if err := in.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("drain with a call in progress: %v", err)
		}
		close(sink.block)
		if a := <-first; a.status != 200 {
			t.Fatalf("call in progress: %d %s", a.status, a.raw)
		}
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(in.m.inflight); n != 0 {
			t.Fatalf("in flight after the drain: %v, want 0", n)
		}
		done, stop := context.WithCancel(context.Background())
		stop()
		if err := in.Drain(done); err != nil {
			t.Fatalf("drain after the calls ended: %v", err)
		}
	})
}

func TestIntake_Metrics(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		in, srv := newTestServer(t, front, &recorder{})
		for _, path := range []string{"plain?token=tok-0123456789abc", "plain?token=bad", "ghost?token=x", "ghost2?token=x"} {
			call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/"+path, strings.NewReader(`{}`), nil)
		}
		for labels, want := range map[[2]string]float64{{"plain", "200"}: 1, {"plain", "401"}: 1, {"", "404"}: 2} {
			if got := testutil.ToFloat64(in.m.requests.WithLabelValues(labels[0], labels[1])); got != want {
				t.Errorf("requests{webhook=%q,code=%s} = %v, want %v", labels[0], labels[1], got, want)
			}
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}, directory{}, &recorder{}, nil, nil); err == nil {
		t.Fatal("New without a source succeeded")
	}
	in, err := New(Config{Source: "s"}, directory{}, &recorder{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.cfg.TenantID != webhooks.DefaultTenant || in.cfg.RetryAfter != DefaultRetryAfter {
		t.Fatalf("defaults %+v", in.cfg)
	}
}

// TestIntake_TooLargeWholeBodyFirst: a client that writes its whole body
// before it reads the answer (Python's urllib, many webhook senders) gets
// the 413 when the body is within twice the limit, declared or chunked:
// the intake reads and drops it before answering and closing. Closing at
// once would make the client see a reset or a broken pipe instead of the
// answer.
func TestIntake_TooLargeWholeBodyFirst(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		// More than net/http drains by itself, and than the loopback socket
		// buffers hold: the client is still writing when the answer comes.
		const limit = 8 << 20
		in, err := New(Config{Source: "sat-1"}, directory{"big": webhookstest.Parse(t, fmt.Sprintf(`{"id": "big", "token": "tok-0123456789abc", "max_payload_size": %d,
		"collector_config": {"event_type": "webhook", "payload": {}}}`, limit))}, &recorder{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		in.Register(mux)
		srv := serveFront(t, front, in, mux, ServerConfig{})
		body := `{"x": "` + strings.Repeat("a", limit*3/2) + `"}`
		for _, tc := range []struct{ name, head, body string }{
			{"declared length", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body},
			{"chunked", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for range 2 { // a reset is a race: try it more than once
					conn, err := net.Dial("tcp", srv.Addr)
					if err != nil {
						t.Fatal(err)
					}
					req := "POST /engine/webhook/event/big?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + tc.head + "\r\n" + tc.body
					_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
					if _, err := io.WriteString(conn, req); err != nil {
						conn.Close()
						t.Fatalf("write: %v", err)
					}
					resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
					if err != nil {
						conn.Close()
						t.Fatalf("no answer: %v", err)
					}
					resp.Body.Close()
					conn.Close()
					if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
						t.Fatalf("status %d, close %v; want 413 and the connection closed", resp.StatusCode, resp.Close)
					}
				}
			})
		}
	})
}
