package intake

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
)

// otelTraceparent is the reference: what OpenTelemetry's W3C propagator
// extracts from h, as the intake writes it ("" when it extracts nothing).
func otelTraceparent(h http.Header) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	if !sc.IsValid() {
		return "", ""
	}
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom)
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags.String(), sc.TraceState().String()
}

func checkTraceparent(t *testing.T, header, state string) {
	t.Helper()
	h := http.Header{"Traceparent": {header}, "Tracestate": {state}}
	wantTP, wantTS := otelTraceparent(h)
	random := make([]byte, randomLen-8)
	for i := range random {
		random[i] = byte(i + 1)
	}
	got, ts := appendTraceparent(nil, h, random)
	if wantTP == "" {
		if string(got) != "00-0102030405060708090a0b0c0d0e0f10-1112131415161718-03" || ts != "" {
			t.Fatalf("traceparent %q: got %q %q, want a new trace", header, got, ts)
		}
		return
	}
	if string(got) != wantTP || ts != wantTS {
		t.Fatalf("traceparent %q tracestate %q: got %q %q, want %q %q", header, state, got, ts, wantTP, wantTS)
	}
}

var traceparentSeeds = []string{
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-future",
	"fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
	"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
	"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"",
}

func TestAppendTraceparent(t *testing.T) {
	t.Parallel()
	for _, tp := range traceparentSeeds {
		for _, ts := range []string{"", "vendor=abc,other=1", "bad state=", " a=1 , b=2"} {
			checkTraceparent(t, tp, ts)
		}
	}
	// No header at all: a new trace.
	got, ts := appendTraceparent(nil, http.Header{}, make([]byte, 24))
	if string(got) != "00-00000000000000000000000000000000-0000000000000000-03" || ts != "" {
		t.Fatalf("got %q %q", got, ts)
	}
}

// FuzzAppendTraceparent checks the traceparent parser against
// OpenTelemetry's.
func FuzzAppendTraceparent(f *testing.F) {
	for _, tp := range traceparentSeeds {
		f.Add(tp, "a=1")
	}
	f.Fuzz(func(t *testing.T, tp, ts string) {
		checkTraceparent(t, tp, ts)
	})
}

func TestEventIDs(t *testing.T) {
	t.Parallel()
	var g eventIDs
	now := time.UnixMilli(1700000000123).Add(456789)
	var last string
	random := []byte{0xff, 1, 2, 3, 4, 5, 6, 7}
	for i := range 5000 { // more than the 3906 steps of one millisecond
		id := string(g.appendNew(nil, now, random))
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("id %q: %v", id, err)
		}
		if id <= last {
			t.Fatalf("id %d %s is not after %s", i, id, last)
		}
		last = id
		// 1700000000123 ms is 0x018bcfe5687b, and 456789 ns is 1784 (0x6f8) steps of 256 ns.
		if i == 0 && !strings.HasPrefix(id, "018bcfe5-687b-76f8-bf01-020304050607") {
			t.Fatalf("first id %s", id)
		}
	}
}

func TestQueryToken(t *testing.T) {
	t.Parallel()
	for _, q := range queryTokenSeeds {
		checkQueryToken(t, q)
	}
}

var queryTokenSeeds = []string{
	"token=tok-0123456789abc", "", "token", "token=", "a=1&token=tok-0123456789abc&b=2", "token=a&token=b", "token=a%20b", "tok%65n=x",
	"token=a+b", "token=x;y=1", "token=%zz&token=ok", "&&token=t&", "=token", "token==x", "TOKEN=x",
	strings.Repeat("a=1&", 99) + "token=x", strings.Repeat("a=1&", 100) + "token=x",
}

func checkQueryToken(t *testing.T, q string) {
	t.Helper()
	u := &url.URL{RawQuery: q}
	want := u.Query()["token"]
	got, n := queryToken(u.RawQuery)
	if n != len(want) || n > 0 && got != want[0] {
		t.Fatalf("query %q: got %q ×%d, want %q", q, got, n, want)
	}
}

func FuzzQueryToken(f *testing.F) {
	for _, q := range queryTokenSeeds {
		f.Add(q)
	}
	f.Fuzz(checkQueryToken)
}

// TestIntake_TraceContextOfStrangers: with the local sampler at 0, a
// caller's sampled traceparent is honoured only once its token (and
// signature) verified: a refused stranger's call exports no span and
// chooses no trace id, and an oversized tracestate is dropped.
func TestIntake_TraceContextOfStrangers(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))),
			sdktrace.WithSpanProcessor(spans))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		sink := &recorder{}
		_, srv := serveIntake(t, front, Config{Source: "sat-1", TracerProvider: tp}, testDirectory(t), sink)

		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		big := make([]string, 0, 32)
		for i := range 32 {
			big = append(big, fmt.Sprintf("k%d=%s", i, strings.Repeat("v", 180)))
		}
		stranger := http.Header{"Traceparent": {"00-" + traceID + "-00f067aa0ba902b7-01"}, "Tracestate": {strings.Join(big, ",")}}
		for _, tc := range []struct{ name, path string }{
			{"wrong token", "/engine/webhook/event/plain?token=nope"},
			{"no token", "/engine/webhook/event/plain"},
			{"unknown webhook", "/engine/webhook/event/ghost?token=tok-0123456789abc"},
			{"wrong signature", "/engine/webhook/event/signed?token=tok-0123456789abc"},
		} {
			for range 20 {
				if a := call(t, srv.Client(), "POST", srv.URL+tc.path, strings.NewReader(`{}`), stranger); a.status == http.StatusOK {
					t.Fatalf("%s: accepted", tc.name)
				}
			}
			if n := len(spans.Ended()); n != 0 {
				t.Fatalf("%s: %d spans exported with the sampler at 0 (the first with trace id %s)", tc.name, n, spans.Ended()[0].SpanContext().TraceID())
			}
		}

		// The authenticated caller's context is honoured, its tracestate
		// bounded.
		a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/plain?token=tok-0123456789abc", strings.NewReader(`{}`), stranger)
		if a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.raw)
		}
		// The span ends just after the answer is written: wait for it.
		deadline := time.Now().Add(10 * time.Second)
		for len(spans.Ended()) == 0 && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		ended := spans.Ended()
		if len(ended) != 1 || ended[0].SpanContext().TraceID().String() != traceID {
			t.Fatalf("%d spans after an authenticated call, want 1 in trace %s", len(ended), traceID)
		}
		if ts := ended[0].SpanContext().TraceState().String(); len(ts) > tracing.MaxTracestateLen {
			t.Errorf("tracestate of %d bytes kept", len(ts))
		}
		if h := headerMap(sink.last(t)); !strings.Contains(h[HeaderTraceparent], traceID) || len(h[HeaderTracestate]) > tracing.MaxTracestateLen {
			t.Errorf("record trace headers %q %d bytes of tracestate", h[HeaderTraceparent], len(h[HeaderTracestate]))
		}
	})
}
