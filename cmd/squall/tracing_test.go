package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/tracing/tracingtest"
)

// TestTracing follows one webhook call through a real `squall satellite`
// and a real `squall engine` to the action's target: the satellite exports
// over OTLP/HTTP (flags), the engine over OTLP/gRPC (OTEL_* variables),
// both to receivers in this process, and only when they stop (the batch
// delay is an hour: the graceful stop flushes). The spans form one trace,
// parents intact: the caller's span, the satellite's request span, its
// Kafka send, the engine's consumer span, the evaluation (with the matched
// rule) and the http action's client span, whose traceparent the target
// receives. The engine's logs and the archived event carry the trace id.
func TestTracing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	satSpans, engineSpans := tracingtest.NewHTTP(t), tracingtest.NewGRPC(t)

	traceparents := make(chan string, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents <- r.Header.Get("Traceparent")
	}))
	t.Cleanup(target.Close)

	broker := newRestartableBroker(t, filepath.Join(dir, "kafka"))
	base := startMaster(t, "--allow-unsigned-tokens")
	tokenFile, token := adminTokenFile(t, dir)
	apitest.DeployTree(t, base, token, fmt.Appendf(nil, `{"version": "1.1", "Filter": {"name": "root",
	  "filter": {"description": "", "active": true, "filter": {}},
	  "nodes": [{"Ruleset": {"name": "traced", "rules": [
	    {"name": "notify", "description": "", "continue": true, "active": true,
	     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "push"}, "WITH": {}},
	     "actions": [{"id": "http", "payload": {"url": %q, "body": {"ref": "${event.payload.ref}"}}},
	                 {"id": "archive", "payload": {"event": "${event}"}}]}]}}]}}`, target.URL+"/hook"))

	archive := filepath.Join(dir, "archive")
	actions := filepath.Join(dir, "actions.json")
	writeFile(t, actions, fmt.Sprintf(`{"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]},
	  "archive": {"base_path": %q, "default_path": "/events.log"}}`, archive))
	eng := startEngine(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + engineSpans.URL(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=3600000"},
		"--master", base, "--token-file", tokenFile, "--kafka-brokers", broker.addr, "--actions-config", actions, "--log-level", "debug")

	sat := startSatellite(t, []string{"OTEL_BSP_SCHEDULE_DELAY=3600000"}, "--name", "sat1", "--kafka-brokers", broker.addr,
		"--spool-dir", filepath.Join(dir, "spool"), "--webhooks-dir", webhookDir(t, dir), "--otel-endpoint", satSpans.URL())
	for _, p := range []*proctest.Proc{eng, sat} {
		if !strings.Contains(p.Logs.String(), `"msg":"tracing on"`) {
			t.Fatalf("no tracing on line in the log:\n%s", p.Logs.String())
		}
	}

	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, sat.Base+"/engine/webhook/event/github?token=s3cret-0123456789ab",
		strings.NewReader(`{"ref": "refs/heads/main"}`))
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := calltest.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %d", resp.StatusCode)
	}
	var got string
	select {
	case got = <-traceparents:
	case <-time.After(60 * time.Second):
		t.Fatalf("the http action did not reach its target within 60s:\n%s", eng.Logs.Tail(30))
	}

	// Stop both: the spans leave on the way out.
	for _, p := range []*proctest.Proc{sat, eng} {
		if err := p.End(t, os.Interrupt); err != nil {
			t.Errorf("%s: %v\n%s", p.Name, err, p.Logs.Tail(30))
		}
	}
	// The receivers answered every export before the processes exited.
	byName := func(spans []tracingtest.Span, name string) tracingtest.Span {
		t.Helper()
		s, ok := tracingtest.Find(spans, name)
		if !ok {
			t.Fatalf("no span %q among:\n%s", name, tracingtest.Format(spans))
		}
		return s
	}
	ss, es := satSpans.Spans(), engineSpans.Spans()
	server := byName(ss, "POST /engine/webhook/event/{id}")
	send := byName(ss, "send squall.events")
	consume := byName(es, "process squall.events")
	eval := byName(es, "evaluate tree")
	action := byName(es, "action http")
	archiveSpan := byName(es, "action archive")
	chain := []struct {
		what          string
		span          tracingtest.Span
		service, kind string
		parent        string
	}{
		{"request", server, "squall-satellite", "server", callerSpan},
		{"send", send, "squall-satellite", "producer", server.SpanID},
		{"consume", consume, "squall-engine", "consumer", send.SpanID},
		{"evaluation", eval, "squall-engine", "internal", consume.SpanID},
		{"http action", action, "squall-engine", "client", consume.SpanID},
		{"archive action", archiveSpan, "squall-engine", "internal", consume.SpanID},
	}
	for _, c := range chain {
		if c.span.TraceID != callerTrace || c.span.ParentSpanID != c.parent || c.span.Service != c.service || c.span.Kind != c.kind {
			t.Errorf("%s span: trace %s parent %s service %s kind %s; want trace %s parent %s service %s kind %s",
				c.what, c.span.TraceID, c.span.ParentSpanID, c.span.Service, c.span.Kind, callerTrace, c.parent, c.service, c.kind)
		}
	}
	if r := eval.Attributes["squall.rules.matched"]; r != "[traced/notify]" {
		t.Errorf("evaluation span: matched rules %q", r)
	}
	if want := "00-" + callerTrace + "-" + action.SpanID + "-01"; got != want {
		t.Errorf("the target got traceparent %q, want the action span's %q", got, want)
	}

	// The engine's logs of the event and the archived event carry the trace.
	found := false
	sc := bufio.NewScanner(strings.NewReader(eng.Logs.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "event processed" {
			found = true
			if line["trace_id"] != callerTrace || line["span_id"] != consume.SpanID {
				t.Errorf("event log line without the consumer span: %s", sc.Bytes())
			}
		}
	}
	if !found {
		t.Errorf("no event processed line in the engine's debug log")
	}
	b, err := os.ReadFile(filepath.Join(archive, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	var archived struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal(b, &archived); err != nil || archived.TraceID != callerTrace {
		t.Errorf("archived event %s: trace_id %q, want %s", b, archived.TraceID, callerTrace)
	}
}
