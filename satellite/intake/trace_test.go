package intake

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
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
	"token=tok", "", "token", "token=", "a=1&token=tok&b=2", "token=a&token=b", "token=a%20b", "tok%65n=x",
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

func TestRandomSource(t *testing.T) {
	// Every piece is fresh: no piece of 8 bytes repeats and none is all
	// zeros, within a generator and across generators.
	var s randomSource
	seen := map[[8]byte]bool{}
	check := func(src *randomSource) {
		for range 1000 {
			var p [8]byte
			src.read(p[:])
			if p == ([8]byte{}) || seen[p] {
				t.Fatalf("piece %x given twice or not filled", p)
			}
			seen[p] = true
		}
	}
	check(&s)
	var other randomSource // a new generator, its own seed
	check(&other)
	var big [randomLen]byte
	s.read(big[:])
	if big == ([randomLen]byte{}) {
		t.Fatal("not filled")
	}
}
