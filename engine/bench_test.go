package engine

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/internal/tracingtest"
)

// benchTree is Tornado's full-match rule (engine/tree/testdata/tornado/
// benches_resources/full_match/rules/rule_01.json) under the root, its
// nagios action replaced by an archive action that writes the same fields.
const benchTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "bench", "rules": [{
    "name": "motion_sensor_4", "description": "Motion Sensor port4: Motion Detection", "continue": true, "active": true,
    "constraint": {
      "WHERE": {"type": "AND", "operators": [
        {"type": "equal", "first": "${event.type}", "second": "trap"},
        {"type": "equal", "first": "${event.payload.host_ip}", "second": "10.65.5.31"},
        {"type": "contain", "first": "${event.payload.line_11}", "second": " 1"},
        {"type": "contain", "first": "${event.payload.line_9}", "second": "Sensor 4"}]},
      "WITH": {
        "sensor_description": {"from": "${event.payload.line_5}", "regex": {"match": "(.*)", "group_match_idx": 0}},
        "sensor_room": {"from": "${event.payload.line_6}", "regex": {"match": "(.*)", "group_match_idx": 0}}}},
    "actions": [{"id": "archive", "payload": {"archive_type": "bench", "tenant": "${event.metadata.tenant_id}", "event": {
      "host": "bz-outsideserverroom-sensors", "service": "motion_sensor_port_4", "status": "Critical",
      "host_ip": "${event.payload.host_ip}", "room": "${_variables.sensor_room}",
      "message": "${_variables.sensor_description}"}}}]}]}}]}}`

// BenchmarkService measures events/s through one engine: b.N full-match
// events are put in an in-process kfake topic (6 partitions, 64 tenant
// keys) before the timer starts; the timer runs from the engine's start
// until the last event's offset is committed. It reports the cost of each
// stage per event (decode, evaluate, act: the archive action; commit: the
// commits' time spread over the events), from the engine's own histograms.
//
//	go test -run '^$' -bench BenchmarkService -benchtime 200000x ./engine
func BenchmarkService(b *testing.B) {
	for _, bc := range []struct {
		name    string
		workers int
	}{
		{"workers=4", 4},
		{"workers=2", 2},
	} {
		b.Run(bc.name, func(b *testing.B) { benchService(b, bc.workers, nil) })
	}
}

// BenchmarkServiceTracing is BenchmarkService with 4 workers and tracing
// off (no tracer provider: what runs without an OTLP endpoint), configured
// but sampling nothing, and sampling every event (the events carry a
// sampled traceparent) into a batch processor whose exporter drops the
// spans: the SDK's cost without the export's network. Each event then
// records a consumer span, an evaluation span (with the matched rule) and
// an action span.
//
//	go test -run '^$' -bench BenchmarkServiceTracing -benchtime 100000x -count 5 ./engine
func BenchmarkServiceTracing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"unsampled", sdktrace.NeverSample()},
		{"sampled", sdktrace.ParentBased(sdktrace.AlwaysSample())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchService(b, 4, tracingtest.Dropping(b, bc.sampler))
		})
	}
}

func benchService(b *testing.B, workers int, tp trace.TracerProvider) {
	broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{testTopic, testDLQ}, Partitions: 6})
	stub := newStubMaster()
	stub.set(1, benchTree)
	master := httptest.NewServer(stub)
	b.Cleanup(master.Close)

	raw, err := os.ReadFile("tree/testdata/tornado/benches_resources/full_match/events/event_01.json")
	if err != nil {
		b.Fatal(err)
	}
	const tenants = 64
	values := make([][]byte, tenants)
	for i := range values {
		v := strings.Replace(string(raw), `"type": "trap",`, fmt.Sprintf(`"type": "trap", "metadata": {"tenant_id": "tenant-%02d"},`, i), 1)
		values[i] = []byte(v)
	}
	produceBench(b, broker.Addr, b.N, values)

	dir := b.TempDir()
	actions := filepath.Join(dir, "actions.json")
	writeFile(b, actions, fmt.Sprintf(`{"archive": {"base_path": %q, "default_path": "/all.log",
		"paths": {"bench": "/${tenant}.log"}}}`, filepath.Join(dir, "archive")))
	cfg := Default()
	cfg.MasterURLs = []string{master.URL}
	cfg.Token = stub.token
	cfg.Brokers = []string{broker.Addr}
	cfg.Workers = workers
	cfg.ActionsConfig = actions
	cfg.HTTPAddr = ""
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.TracerProvider = tp
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}

	b.ReportAllocs()
	b.ResetTimer()
	cpu0, _ := cputime.Process()
	ctx, cancel := context.WithCancel(context.WithoutCancel(b.Context()))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(10*time.Minute + time.Duration(b.N)*100*time.Microsecond)
	// The engine gives no signal for "all done": poll its counter (cheap),
	// then the committed offsets (a Kafka round trip) once it is reached.
	for metrictest.Sum(b, reg, "squall_engine_events_processed_total", nil) < float64(b.N) || !committedAll(b, broker) {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %d events processed", metrictest.Sum(b, reg, "squall_engine_events_processed_total", nil), b.N)
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	cpu1, cpuOK := cputime.Process()
	elapsed := b.Elapsed()
	stages := stageSums(b, reg)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	lines := 0
	files, _ := filepath.Glob(filepath.Join(dir, "archive", "*.log"))
	for _, f := range files {
		content, _ := os.ReadFile(f)
		lines += strings.Count(string(content), "\n")
	}
	if lines != b.N {
		b.Fatalf("%d archive lines for %d events", lines, b.N)
	}

	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	if cpuOK {
		// The process's CPU per event (broker and poller included):
		// steadier than events/s on a shared machine.
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/event")
	}
	n := float64(b.N)
	for _, st := range []string{stageDecode, stageEvaluate, stageAct} {
		b.ReportMetric(stages[st].sum*1e9/n, st+"-ns/event")
	}
	b.ReportMetric(stages[stageCommit].sum*1e9/n, "commit-ns/event")
	b.ReportMetric(float64(stages[stageCommit].count), "commits")
}

// committedAll reports whether the group committed every partition's end.
func committedAll(b *testing.B, broker *kafkatest.Broker) bool {
	ends := broker.EndOffsets(b, testTopic)
	committed := broker.Committed(b, DefaultGroup, testTopic)
	for p, end := range ends {
		if committed[p] != end {
			return false
		}
	}
	return true
}

type stageSum struct {
	sum   float64
	count uint64
}

func stageSums(b *testing.B, g prometheus.Gatherer) map[string]stageSum {
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]stageSum{}
	for _, mf := range mfs {
		if mf.GetName() != "squall_engine_stage_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "stage")] = stageSum{m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()}
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// produceBench writes n events, round-robin over the values (keyed by
// their tenant), with the satellite's headers, from 4 goroutines.
func produceBench(b *testing.B, addr string, n int, values [][]byte) {
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{
		Dial: kafkasource.Dial{Brokers: []string{addr}}, Topic: testTopic, BatchSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const chunk = 5000
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for start := range next {
				recs := make([]kafkasource.Record, 0, chunk)
				for i := start; i < min(start+chunk, n); i++ {
					t := i % len(values)
					recs = append(recs, kafkasource.Record{
						Key:   fmt.Appendf(nil, "tenant-%02d", t),
						Value: values[t],
						Headers: []kafkasource.Header{
							{Key: HeaderEventID, Value: []byte(uuid.Must(uuid.NewV7()).String())},
							{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
							{Key: "squall-webhook", Value: []byte("snmp")},
							{Key: "squall-source", Value: []byte("sat-bench")},
						},
					})
				}
				if err := w.Write(b.Context(), recs...); err != nil {
					errs <- err
				}
			}
		})
	}
	for start := 0; start < n; start += chunk {
		next <- start
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
