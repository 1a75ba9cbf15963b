package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/internal/tracing/tracingtest"
)

func TestNew_off(t *testing.T) {
	t.Parallel()
	for _, cfg := range []tracing.Config{
		{},
		{ServiceName: "x", Sampler: "always_on"},
		{Endpoint: "http://127.0.0.1:4318", Disabled: true},
	} {
		tr, err := tracing.New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tr.TracerProvider() != nil || tr.Exporter() != "" {
			t.Errorf("%+v: tracing is on", cfg)
		}
		if tracing.Tracer(tr.TracerProvider(), "x") != nil {
			t.Errorf("%+v: a tracer without a provider", cfg)
		}
		if err := tr.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}
}

func TestTracing_Exporter(t *testing.T) {
	t.Parallel()
	tr, err := tracing.New(t.Context(), tracing.Config{TracesEndpoint: "https://user:secret@collector:4318/v1/traces?key=k"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(t.Context())
	if got := tr.Exporter(); got != "http/protobuf https://collector:4318/v1/traces" {
		t.Errorf("Exporter() = %q, want it without user info and query", got)
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  tracing.Config
		want string // "" for valid
	}{
		{"zero", tracing.Config{}, ""},
		{"grpc", tracing.Config{Protocol: "grpc", Endpoint: "https://c:4317"}, ""},
		{"ratio", tracing.Config{Sampler: "parentbased_traceidratio", SamplerArg: "0.25"}, ""},
		{"bad protocol", tracing.Config{Protocol: "http/json"}, `protocol "http/json"`},
		{"bad sampler", tracing.Config{Sampler: "jaeger_remote"}, `sampler "jaeger_remote"`},
		{"bad ratio", tracing.Config{Sampler: "traceidratio", SamplerArg: "2"}, `sampler argument "2"`},
		{"bad endpoint", tracing.Config{Endpoint: "collector:4318"}, `endpoint "collector:4318"`},
		{"bad traces endpoint", tracing.Config{TracesEndpoint: "ftp://c/v1/traces"}, `traces endpoint "ftp://c/v1/traces"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want %q", err, tt.want)
			}
			if tt.want != "" {
				if _, err := tracing.New(t.Context(), tt.cfg); err == nil {
					t.Fatal("New accepts it")
				}
			}
		})
	}
}

// TestNew_export sends a span to a real receiver over each protocol.
func TestNew_export(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		protocol string
		receiver func(testing.TB) *tracingtest.Receiver
	}{
		{tracing.ProtocolHTTPProtobuf, tracingtest.NewHTTP},
		{tracing.ProtocolGRPC, tracingtest.NewGRPC},
	} {
		t.Run(tt.protocol, func(t *testing.T) {
			t.Parallel()
			rcv := tt.receiver(t)
			tr, err := tracing.New(t.Context(), tracing.Config{Endpoint: rcv.URL(), Protocol: tt.protocol, ServiceName: "squall-test"})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tr.Exporter(), tt.protocol+" "+rcv.URL()) {
				t.Errorf("Exporter() = %q", tr.Exporter())
			}
			tracer := tracing.Tracer(tr.TracerProvider(), "test")
			_, span := tracer.Start(t.Context(), "work", trace.WithSpanKind(trace.SpanKindServer))
			span.End()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			// Shutdown flushes: the span is there once it returns.
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := rcv.Spans()
			if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != "squall-test" || spans[0].Kind != "server" {
				t.Fatalf("received:\n%s", tracingtest.Format(spans))
			}
		})
	}
}

// TestNew_sampler checks that the sampler applies to new traces and that
// the default follows the parent's decision.
func TestNew_sampler(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewHTTP(t)
	sampled := func(sampler string, parent trace.TraceFlags) bool {
		tr, err := tracing.New(t.Context(), tracing.Config{Endpoint: rcv.URL(), Sampler: sampler})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Shutdown(t.Context())
		ctx := t.Context()
		if parent != 0xff {
			ctx = tracing.ContextFromHeaders(ctx, []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0"+string("0123"[parent])), nil)
		}
		_, span := tracing.Tracer(tr.TracerProvider(), "t").Start(ctx, "s")
		defer span.End()
		return span.SpanContext().IsSampled()
	}
	for _, tt := range []struct {
		sampler string
		parent  trace.TraceFlags // 0xff: no parent
		want    bool
	}{
		{"", 0xff, true},
		{"", 0, false},
		{"", 1, true},
		{"always_off", 0xff, false},
		{"always_on", 0, true},
		{"parentbased_always_off", 0xff, false},
		{"parentbased_always_off", 1, true},
		{"traceidratio", 0xff, true},
	} {
		if got := sampled(tt.sampler, tt.parent); got != tt.want {
			t.Errorf("sampler %q, parent flags %v: sampled %v, want %v", tt.sampler, tt.parent, got, tt.want)
		}
	}
}

func TestTraceparent_roundTrip(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := tracing.ContextFromHeaders(t.Context(), []byte(tp), []byte("congo=t61rcWkgMzE"))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceState().String() != "congo=t61rcWkgMzE" {
		t.Fatalf("span context %+v", sc)
	}
	if got := string(tracing.AppendTraceparent(nil, sc)); got != tp {
		t.Errorf("AppendTraceparent = %s, want %s", got, tp)
	}
	h := http.Header{}
	tracing.Inject(ctx, h)
	if h.Get("Traceparent") != tp || h.Get("Tracestate") != "congo=t61rcWkgMzE" {
		t.Errorf("injected %v", h)
	}
	if sc := trace.SpanContextFromContext(tracing.Extract(t.Context(), h)); string(tracing.AppendTraceparent(nil, sc)) != tp {
		t.Errorf("extracted %v", sc)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-b7ad6b7169203331-01", "garbage"} {
		if trace.SpanContextFromContext(tracing.ContextFromHeaders(t.Context(), []byte(bad), nil)).IsValid() {
			t.Errorf("%q gives a valid span context", bad)
		}
	}
	h = http.Header{}
	tracing.Inject(t.Context(), h)
	if len(h) != 0 {
		t.Errorf("a context without a span injects %v", h)
	}
}

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := tracing.ContextFromHeaders(t.Context(), []byte(tp), nil)
	log.InfoContext(ctx, "with span")
	log.InfoContext(t.Context(), "without span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %q", buf.String())
	}
	var with, without map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &with); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &without); err != nil {
		t.Fatal(err)
	}
	if with["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || with["span_id"] != "b7ad6b7169203331" || with["component"] != "x" {
		t.Errorf("with a span: %s", lines[0])
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("without a span: %s", lines[1])
	}
}
