package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
)

const (
	testTopic = "squall.events"
	testDLQ   = "squall.events.dlq"
	testOut   = "squall.actions.out" // the kafka actions' topic
)

// testTree is the export file of the trees the tests deploy: events of type
// "order" are archived under <version>/<tenant>.log and posted to the
// receiver at /<version>; events of type "nagios" call an action no
// executor handles; events of type "flaky" are posted to /fail, which
// always fails. VERSION and RECEIVER are replaced.
const testTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "all", "rules": [
    {"name": "orders", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "order"}, "WITH": {}},
     "actions": [
       {"id": "archive", "payload": {"event": "${event}", "archive_type": "VERSION", "tenant": "${event.metadata.tenant_id}"}},
       {"id": "http", "payload": {"url": "RECEIVER/VERSION", "tree": "VERSION", "id": "${event.payload.id}",
                                  "seq": "${event.payload.seq}", "tenant": "${event.metadata.tenant_id}"}}]},
    {"name": "nagios", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "nagios"}, "WITH": {}},
     "actions": [{"id": "nagios", "payload": {"host": "${event.payload.host}"}}]},
    {"name": "flaky", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "flaky"}, "WITH": {}},
     "actions": [
       {"id": "http", "payload": {"url": "RECEIVER/fail", "id": "${event.payload.id}"}},
       {"id": "archive", "payload": {"event": "${event}", "archive_type": "VERSION", "tenant": "${event.metadata.tenant_id}"}}]}
  ]}}]}}`

// env is the world of an engine test: a kfake broker, a one-node master
// cluster, an http receiver and an archive directory.
type env struct {
	t        testing.TB
	broker   *kafkatest.Broker
	masters  *mastertest.Cluster
	token    string
	receiver *receiver
	archive  string
	actions  string // actions config file
	writer   *kafkasource.Writer

	// tails are the archive files read so far, by path: archivedEvents
	// parses only what was appended since its last call, so that polling
	// a growing archive costs the engine under test no CPU per line
	// already seen.
	tailsMu sync.Mutex
	tails   map[string]*archiveTail
}

// archiveTail is what was read of one archive file: its complete lines,
// and the offset after the last one.
type archiveTail struct {
	off   int64
	lines []archived
}

// newEnv starts the world; setups run on each master before it starts
// (to mount more routes), with the broker running.
func newEnv(t testing.TB, partitions int32, setups ...func(e *env, s *master.Server)) *env {
	t.Helper()
	return newEnvWith(t, envConfig{broker: kafkatest.Config{Partitions: partitions}, setups: setups})
}

// envConfig shapes an env beyond newEnv's defaults.
type envConfig struct {
	// broker is the kfake broker's configuration; the tests' topics are
	// added.
	broker kafkatest.Config
	// masters is the size of the master cluster (default 1).
	masters int
	// setups run on each master before it starts (see newEnv).
	setups []func(e *env, s *master.Server)
}

// newEnvWith is newEnv shaped by ec.
func newEnvWith(t testing.TB, ec envConfig) *env {
	t.Helper()
	e := &env{t: t}
	ec.broker.Topics = []string{testTopic, testDLQ, testOut}
	e.broker = kafkatest.Start(t, ec.broker)
	// The master serves the findings API too, mounted on the leader as
	// master/node does, for the finding action.
	e.masters = mastertest.TestCluster(t, max(ec.masters, 1), mastertest.WithSetup(func(_ int, s *master.Server) {
		a := findings.New(findings.Default(), s.Store(), s.Verifier(), nil)
		if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeader); err != nil {
			t.Fatal(err)
		}
		for _, setup := range ec.setups {
			setup(e, s)
		}
	}))
	e.token = e.masters.Token(auth.Claims{User: "engine", Auths: map[string]auth.Authorization{
		"root": {Path: []string{"root"}, Roles: []string{string(auth.View)}},
	}})
	e.receiver = newReceiver(t)
	dir := t.TempDir()
	e.archive = filepath.Join(dir, "archive")
	e.actions = filepath.Join(dir, "actions.json")
	writeFile(t, e.actions, fmt.Sprintf(`{
		"retry": {"max_attempts": 2, "base_delay": "5ms", "max_delay": "10ms", "jitter": 0},
		"archive": {"base_path": %q, "default_path": "/other.log",
		            "paths": {"v1": "/v1/${tenant}.log", "v2": "/v2/${tenant}.log", "v3": "/v3/${tenant}.log"}},
		"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]}}`, e.archive))
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{
		Dial: kafkasource.Dial{Brokers: []string{e.broker.Addr}, Timeout: 2 * time.Second}, Topic: testTopic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	e.writer = w
	return e
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deploy makes the test tree of version the active tree and returns its
// index.
func (e *env) deploy(version string) uint64 {
	e.t.Helper()
	return e.deployExport(strings.NewReplacer("VERSION", version, "RECEIVER", e.receiver.URL).Replace(testTree))
}

// deployExport makes the tree of an export file the active tree and
// returns its index.
func (e *env) deployExport(export string) uint64 {
	e.t.Helper()
	ex, err := config.DecodeExport([]byte(export))
	if err != nil {
		e.t.Fatalf("test tree: %v", err)
	}
	idx, err := e.masters.Server(e.masters.Leader()).Store().ReplaceActive(e.t.Context(), ex.Node)
	if err != nil {
		e.t.Fatalf("deploy: %v", err)
	}
	return idx
}

// config returns an engine configuration for the env: loopback, short
// timeouts.
func (e *env) config() Config {
	cfg := Default()
	cfg.Name = "engine-test"
	cfg.MasterURLs = []string{e.masters.URL(0)}
	cfg.Token = e.token
	cfg.WatchWait = 5 * time.Second
	cfg.WatchBackoffMin = 20 * time.Millisecond
	cfg.WatchBackoffMax = 200 * time.Millisecond
	cfg.Brokers = []string{e.broker.Addr}
	cfg.Kafka = KafkaTuning{
		DialTimeout: 2 * time.Second,
		// kafka-go's reader gives a fetch a read deadline of MaxWait and
		// asks the broker to wait at most 3/4 of it (reader.read,
		// adjustDeadlineForRTT in v0.4.51): an answer later than MaxWait/4
		// after the broker's wait is an i/o timeout, which closes the
		// connection and stops the partition's reader for a backoff of
		// 100ms to 1s before it reconnects. With 100ms (25ms of slack) a
		// busy 2-core machine under -race timed out dozens of fetches a
		// test (93 in one failed run) and starved the engine. 1s leaves
		// 250ms of slack and costs no latency: kfake answers a waiting
		// fetch as soon as a record is produced.
		MaxWait:           time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    3 * time.Second,
		RebalanceTimeout:  3 * time.Second,
	}
	cfg.Workers = 4
	cfg.CommitInterval = 50 * time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.ActionsConfig = e.actions
	cfg.HTTPAddr = "127.0.0.1:0"
	return cfg
}

// testTraceID is the trace id of every test event's traceparent header.
const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// event is a test event.
type event struct {
	id     string // squall-event-id
	tenant string // key and metadata.tenant_id
	typ    string
	seq    int
	raw    []byte // the value when set, else built from the fields
}

func (ev event) record() kafkasource.Record {
	value := ev.raw
	if value == nil {
		value = fmt.Appendf(nil, `{"type": %q, "created_ms": %d, "metadata": {"tenant_id": %q},
			"payload": {"id": %q, "seq": %d, "host": "h-%d"}}`, ev.typ, time.Now().UnixMilli(), ev.tenant, ev.id, ev.seq, ev.seq)
	}
	return kafkasource.Record{
		Key:   []byte(ev.tenant),
		Value: value,
		Headers: []kafkasource.Header{
			{Key: HeaderEventID, Value: []byte(ev.id)},
			{Key: "traceparent", Value: []byte("00-" + testTraceID + "-00f067aa0ba902b7-01")},
			{Key: "squall-webhook", Value: []byte("test")},
			{Key: "squall-source", Value: []byte("sat-test")},
		},
	}
}

// orders returns n order events spread over tenants, numbered per tenant.
func orders(n, tenants int) []event {
	evs := make([]event, n)
	seq := map[string]int{}
	for i := range evs {
		tenant := fmt.Sprintf("tenant-%d", i%tenants)
		evs[i] = event{id: uuid.Must(uuid.NewV7()).String(), tenant: tenant, typ: "order", seq: seq[tenant]}
		seq[tenant]++
	}
	return evs
}

// produce writes the events, in order.
func (e *env) produce(evs ...event) {
	e.t.Helper()
	recs := make([]kafkasource.Record, len(evs))
	for i, ev := range evs {
		recs[i] = ev.record()
	}
	if err := e.writer.Write(e.t.Context(), recs...); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// archived is an archive line: the event's id and seq, and the tree
// version whose path it is under.
type archived struct {
	version, tenant, id string
	seq                 int
	traceID             any // the event's trace_id
}

// archivedEvents returns the lines of every archive file: those read
// before, and the complete lines appended since.
func (e *env) archivedEvents() []archived {
	e.t.Helper()
	e.tailsMu.Lock()
	defer e.tailsMu.Unlock()
	if e.tails == nil {
		e.tails = make(map[string]*archiveTail)
	}
	var out []archived
	for _, version := range []string{"v1", "v2", "v3"} {
		files, _ := filepath.Glob(filepath.Join(e.archive, version, "*.log"))
		for _, f := range files {
			tail := e.tails[f]
			if tail == nil {
				tail = &archiveTail{}
				e.tails[f] = tail
			}
			e.readTail(f, version, tail)
			out = append(out, tail.lines...)
		}
	}
	return out
}

// readTail parses the complete lines appended to the archive file since
// tail.off. A line not complete yet (no newline) is read next time.
func (e *env) readTail(path, version string, tail *archiveTail) {
	e.t.Helper()
	f, err := os.Open(path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, tail.off, 1<<40))
	if err != nil {
		e.t.Fatal(err)
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return
	}
	tail.off += int64(end + 1)
	tenant := strings.TrimSuffix(filepath.Base(path), ".log")
	for line := range bytes.Lines(b[:end+1]) {
		var ev struct {
			TraceID any `json:"trace_id"`
			Payload struct {
				ID  string `json:"id"`
				Seq int    `json:"seq"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			e.t.Fatalf("archive %s: line %q: %v", path, line, err)
		}
		tail.lines = append(tail.lines, archived{version: version, tenant: tenant, id: ev.Payload.ID, seq: ev.Payload.Seq, traceID: ev.TraceID})
	}
}

// countIDs counts the archive lines of each event id.
func countIDs(lines []archived) map[string]int {
	n := make(map[string]int, len(lines))
	for _, l := range lines {
		n[l.id]++
	}
	return n
}

// receiver is the http actions' endpoint: it records every call; /fail
// answers 500.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
	gate  chan struct{} // when set, calls wait until it is closed
}

// hold makes the calls wait until the returned function is called.
func (r *receiver) hold() (release func()) {
	gate := make(chan struct{})
	r.mu.Lock()
	r.gate = gate
	r.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

type call struct {
	Path   string
	Tree   string `json:"tree"`
	ID     string `json:"id"`
	Seq    int    `json:"seq"`
	Tenant string `json:"tenant"`
	// Traceparent is the request's traceparent header.
	Traceparent string `json:"-"`
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var c call
		body, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(body, &c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.Path = req.URL.Path
		c.Traceparent = req.Header.Get("Traceparent")
		r.mu.Lock()
		r.calls = append(r.calls, c)
		gate := r.gate
		r.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-req.Context().Done():
				return
			}
		}
		if c.Path == "/fail" {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// runner is a running engine.
type runner struct {
	*Service
	t      testing.TB
	reg    *prometheus.Registry
	log    *logtest.Buffer
	cancel context.CancelCauseFunc
	done   chan error
}

// errCrash, as the cause of the cancellation of Run's context, makes the
// engine stop as a crash would (see crashCause).
type errCrash struct{}

func (errCrash) Error() string { return "the engine crashed" }
func (errCrash) crash()        {}

var _ crashCause = errCrash{}

// startReady starts an engine with cfg and waits until it is ready.
func startReady(t testing.TB, cfg Config) *runner {
	t.Helper()
	r := start(t, cfg)
	waitReady(t, r)
	return r
}

// start runs an engine with cfg until stop, kill or the end of the test.
func start(t testing.TB, cfg Config) *runner {
	t.Helper()
	r := &runner{t: t, reg: prometheus.NewRegistry(), log: &logtest.Buffer{Max: 8 << 20}, done: make(chan error, 1)}
	cfg.Registerer = r.reg
	level := slog.LevelInfo
	if os.Getenv("SQUALL_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(tracing.NewLogHandler(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: level})))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Service = s
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(t.Context()))
	r.cancel = cancel
	go func() { r.done <- s.Run(ctx) }()
	select {
	case <-s.Started():
	case err := <-r.done:
		t.Fatalf("engine stopped: %v", err)
	}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() || os.Getenv("SQUALL_TEST_LOG") != "" {
			t.Logf("engine log:\n%s", r.log.String())
		}
	})
	return r
}

// stop shuts the engine down gracefully and checks that Run returned nil.
func (r *runner) stop() {
	r.t.Helper()
	r.end(nil)
}

// end cancels Run's context with cause and checks that Run returned nil.
func (r *runner) end(cause error) {
	r.t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel(cause)
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("engine Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		r.t.Error("engine did not stop")
	}
}

// kill stops the engine as a crash would: no drain, no last commit.
func (r *runner) kill() {
	r.t.Helper()
	r.end(errCrash{})
	if !strings.Contains(r.log.String(), "crash=true") {
		r.t.Error("the engine stopped, but not as a crash: no consumer stopped crash=true in its log")
	}
}

// counter returns the value of a counter (summed over its labels).
func (r *runner) counter(name string) float64 {
	r.t.Helper()
	return metrictest.Sum(r.t, r.reg, name, nil)
}

// get fetches an ops endpoint of the engine.
func (r *runner) get(path string) (int, []byte) {
	r.t.Helper()
	resp, err := calltest.Client().Get("http://" + r.Addr() + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (r *runner) readyz() (int, Status) {
	r.t.Helper()
	code, b := r.get("/readyz")
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		r.t.Fatalf("/readyz %s: %v", b, err)
	}
	return code, st
}

// waitProgress polls progress until it reports done. Its deadline moves:
// it fails only when the count progress reports (of events archived, of
// offsets committed) stayed the same for stall. A busy machine makes the
// engine slow, not stuck; a lost event or a stuck consumer stops the count.
func waitProgress(t testing.TB, what string, stall time.Duration, progress func() (done bool, n int)) {
	t.Helper()
	done, last := progress()
	moved := time.Now()
	every := 5 * time.Millisecond
	for !done {
		pause(t, what, every)
		every = min(2*every, 100*time.Millisecond)
		var n int
		done, n = progress()
		switch {
		case n != last:
			last, moved = n, time.Now()
		case time.Since(moved) > stall:
			t.Fatalf("waiting for %s: no progress for %s (at %d)", what, stall, n)
		}
	}
}

func pause(t testing.TB, what string, d time.Duration) {
	t.Helper()
	select {
	case <-time.After(d):
	case <-t.Context().Done():
		t.Fatalf("test ended while waiting for %s", what)
	}
}

// testCounter reads a counter.
func testCounter(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return metrictest.Value(&m)
}
