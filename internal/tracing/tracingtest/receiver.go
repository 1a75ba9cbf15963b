// Package tracingtest is an OTLP trace receiver for tests: it listens on
// loopback, over HTTP (protobuf) or gRPC, decodes every
// ExportTraceServiceRequest and keeps the spans, for tests to wait on.
package tracingtest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds an export request.
const maxBody = 16 << 20

// Span is a received span, its ids in lower-case hex.
type Span struct {
	// Service is the service.name of the span's resource.
	Service string
	// Name is the span's name.
	Name string
	// Kind is "server", "client", "producer", "consumer" or "internal".
	Kind string
	// TraceID, SpanID and ParentSpanID are the span's ids; ParentSpanID
	// is empty for a root span.
	TraceID, SpanID, ParentSpanID string
	// Attributes are the span's attributes, as text.
	Attributes map[string]string
	// Events are the names of the span's events.
	Events []string
	// Links are the span ids of the span's links.
	Links []string
	// Error reports an error status.
	Error bool
}

// Receiver collects the spans sent to it.
type Receiver struct {
	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed and replaced when spans arrive
	url     string
}

// NewHTTP starts a receiver of OTLP over HTTP (protobuf) on loopback; its
// [Receiver.URL] is the base URL (spans go to its /v1/traces). It stops
// when the test ends.
func NewHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg collectorpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// NewGRPC starts a receiver of OTLP over gRPC on loopback; its
// [Receiver.URL] is http://127.0.0.1:port. It stops when the test ends.
func NewGRPC(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxBody))
	collectorpb.RegisterTraceServiceServer(srv, grpcService{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	r.url = "http://" + ln.Addr().String()
	return r
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// URL returns the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.url }

// add keeps the spans of an export request.
func (r *Receiver) add(msg *collectorpb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Service:      service,
					Name:         s.GetName(),
					Kind:         kind(s.GetKind()),
					TraceID:      hex.EncodeToString(s.GetTraceId()),
					SpanID:       hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Attributes:   attrs(s.GetAttributes()),
					Error:        s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
				}
				spans = append(spans, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	close(r.changed)
	r.changed = make(chan struct{})
}

func kind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "internal"
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		default:
			m[kv.GetKey()] = anyText(v)
		}
	}
	return m
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_ArrayValue:
		s := "["
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				s += ","
			}
			s += anyText(e)
		}
		return s + "]"
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	}
	return v.String()
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Wait waits until cond holds for the spans received, and returns them; it
// fails the test after timeout.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if cond(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("spans received within %s do not hold what the test waits for; got %d:\n%s", timeout, len(spans), Format(spans))
			return nil
		}
	}
}

// Format lists spans one a line, for failure messages.
func Format(spans []Span) string {
	var s string
	for _, sp := range spans {
		s += sp.Service + " " + sp.Kind + " " + sp.Name + " trace=" + sp.TraceID + " span=" + sp.SpanID + " parent=" + sp.ParentSpanID + "\n"
	}
	return s
}

// Find returns the first span named name, and false if there is none.
func Find(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}
