package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/bench"
	"github.com/squallhq/squall/internal/kafkatest"
)

// benchEngineTree archives every event.
const benchEngineTree = `{"version": "1.1", "Filter": {"name": "root",
  "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "bench", "rules": [{"name": "archive_all", "description": "", "continue": true, "active": true,
    "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "squall_bench"}, "WITH": {}},
    "actions": [{"id": "archive", "payload": {"event": "${event}", "archive_type": "one"}}]}]}}]}}`

// TestBenchEngine runs squall bench engine against a real squall engine
// (with a master and a kfake broker): it writes 300 events, waits until the
// engine counted them from its /metrics, and every event is in the archive.
// Then, with the engine stopped, it preloads 200 more without --metrics, and
// a new engine drains them, measured with --events 0 --from-start.
func TestBenchEngine(t *testing.T) {
	t.Parallel()
	w := newEngineWorld(t, 3)
	addr := w.addr
	start := func() (*proctest.Proc, string) {
		p := w.startEngine(t, "bench-test")
		return p, p.Base + "/metrics"
	}
	run := func(args ...string) bench.EngineResult {
		t.Helper()
		code, stdout, stderr := runBinary(t, append([]string{"bench", "engine", "--json", "--kafka-brokers", addr, "--timeout", "60s"}, args...)...)
		if code != 0 {
			t.Fatalf("squall bench engine %v exited %d:\n%s\n%s", args, code, stdout, stderr)
		}
		var r bench.EngineResult
		dec := json.NewDecoder(strings.NewReader(stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("the --json summary does not parse: %v\n%s", err, stdout)
		}
		return r
	}
	archived := func() int {
		b, _ := os.ReadFile(filepath.Join(w.archive, "one.log"))
		return strings.Count(string(b), "\n")
	}

	p, metrics := start()
	r := run("--events", "300", "--keys", "5", "--batch", "50", "--metrics", metrics)
	if !r.Complete || r.Produced != 300 || r.Counted != 300 || r.Processed != 300 || r.Failed != 0 || r.Deduplicated != 0 ||
		r.DrainRate <= 0 || len(r.Engines) != 1 || r.Engines[0].MaxRSSBytes <= 0 || r.Engines[0].Counted != 300 {
		t.Fatalf("first run: %+v", r)
	}
	if n := archived(); n != 300 {
		t.Fatalf("%d events archived, want 300", n)
	}
	_ = p.End(t, os.Interrupt)

	// A backlog preloaded while no engine runs, then drained.
	r = run("--events", "200", "--keys", "5")
	if r.Produced != 200 || r.Counted != 0 || r.Complete {
		t.Fatalf("preload: %+v", r)
	}
	p, metrics = start()
	r = run("--events", "0", "--expect", "200", "--from-start", "--metrics", metrics)
	if !r.Complete || r.Produced != 0 || r.Counted != 200 || r.Processed != 200 {
		t.Fatalf("backlog run: %+v", r)
	}
	if n := archived(); n != 500 {
		t.Fatalf("%d events archived, want 500", n)
	}
	_ = p.End(t, os.Interrupt)

	// Wrong flags and an engine that cannot be read fail before writing.
	for _, args := range [][]string{
		{"bench", "engine", "--events", "0"},
		{"bench", "engine", "--events", "10", "--metrics", "http://127.0.0.1:1/metrics", "--kafka-brokers", addr},
		{"bench", "engine", "--events", "-1", "--kafka-brokers", addr},
		{"bench", "engine", "--events", "10"},
	} {
		if code, stdout, stderr := runBinary(t, args...); code != 1 || stderr == "" {
			t.Errorf("%v: exit %d, %s %s", args, code, stdout, stderr)
		}
	}
}

// engineWorld is what the engine binary tests run engines in: a master
// (unsigned tokens) with benchEngineTree deployed, a Kafka test broker
// with the events and dead-letter topics, and an actions file archiving
// under archive.
type engineWorld struct {
	base, tokenFile, addr, archive, actions string
}

// startEngine starts an engine of group on w: its master, token, broker
// and actions file, with args besides.
func (w engineWorld) startEngine(t *testing.T, group string, args ...string) *proctest.Proc {
	t.Helper()
	return startEngine(t, []string{"SQUALL_GROUP=" + group},
		append([]string{"--master", w.base, "--token-file", w.tokenFile, "--kafka-brokers", w.addr, "--actions-config", w.actions}, args...)...)
}

// newEngineWorld starts an engineWorld whose topics have partitions, its
// master with masterArgs besides --allow-unsigned-tokens.
func newEngineWorld(t *testing.T, partitions int32, masterArgs ...string) engineWorld {
	t.Helper()
	w := engineWorld{base: startMaster(t, append([]string{"--allow-unsigned-tokens"}, masterArgs...)...)}
	dir := t.TempDir()
	var token string
	w.tokenFile, token = adminTokenFile(t, dir)
	apitest.DeployTree(t, w.base, token, []byte(benchEngineTree))
	w.addr = kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: partitions}).Addr
	w.actions, w.archive = archiveActions(t, dir, "")
	return w
}
