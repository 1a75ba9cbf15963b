package master_test

import (
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
)

// TestServer_Tracing sends a write to a follower: its server span is the
// child of the caller's traceparent, the leader's span the child of the
// follower's (the forward carries the trace), and the raft apply the
// child of the leader's.
func TestServer_Tracing(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	c := mastertest.TestCluster(t, 3, mountTestAPI(), mastertest.WithConfig(func(_ int, cfg *master.Config) {
		cfg.TracerProvider = tp
	}))
	follower := c.Followers()[0]
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.URL(follower)+"/api/v2_beta/test/replace/traced", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	req.Header.Set("Traceparent", caller)
	if resp, _ := calltest.Do(t, calltest.Client().Do, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	var servers []tracetest.SpanStub
	var apply tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			continue
		}
		switch {
		case s.Name == "POST /api/v2_beta/test/" && s.SpanKind == trace.SpanKindServer:
			servers = append(servers, s)
		case strings.HasPrefix(s.Name, "raft apply "):
			apply = s
		}
	}
	if len(servers) != 2 {
		t.Fatalf("%d server spans in the trace, want the follower's and the leader's", len(servers))
	}
	leaderSpan, followerSpan := servers[0], servers[1]
	if leaderSpan.Parent.SpanID().String() == "00f067aa0ba902b7" {
		leaderSpan, followerSpan = followerSpan, leaderSpan
	}
	if followerSpan.Parent.SpanID().String() != "00f067aa0ba902b7" || leaderSpan.Parent.SpanID() != followerSpan.SpanContext.SpanID() {
		t.Errorf("follower span parent %v; leader span parent %v, want %v", followerSpan.Parent.SpanID(), leaderSpan.Parent.SpanID(), followerSpan.SpanContext.SpanID())
	}
	if apply.Name != "raft apply replace_active" || apply.Parent.SpanID() != leaderSpan.SpanContext.SpanID() {
		t.Errorf("raft apply span %q, parent %v, want the leader's %v", apply.Name, apply.Parent.SpanID(), leaderSpan.SpanContext.SpanID())
	}
}
