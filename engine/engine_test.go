package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/master/auth"
)

// The engine tests run real components in-process: a kfake broker spoken
// to by kafka-go, a one-node master cluster (master/mastertest) whose
// active tree they replace through its store, archive files in a temporary
// directory, and an httptest receiver for the http actions.

// Timeouts of the waits on real sockets.
const (
	readyTimeout   = 20 * time.Second
	processTimeout = 40 * time.Second
	// stallTimeout is how long a stream of events may make no progress
	// (archived, committed) before a test gives up: longer than the
	// pauses of a working engine (a group join, kafka-go's reconnection
	// after a fetch timeout, a commit retried at the next interval), however
	// long the whole stream takes on a busy machine.
	stallTimeout = readyTimeout
)

func waitReady(t testing.TB, rs ...*runner) {
	t.Helper()
	polltest.Wait(t, "the engines to be ready", readyTimeout, func() bool {
		for _, r := range rs {
			if !r.Ready() {
				return false
			}
		}
		return true
	})
}

// waitArchived waits until every event is archived at least once, and
// returns the archive lines. It fails when no more events get archived
// for stallTimeout.
func (e *env) waitArchived(evs []event) []archived {
	e.t.Helper()
	var lines []archived
	waitProgress(e.t, fmt.Sprintf("%d events to be archived", len(evs)), stallTimeout, func() (bool, int) {
		lines = e.archivedEvents()
		n := countIDs(lines)
		got := 0
		for _, ev := range evs {
			if n[ev.id] > 0 {
				got++
			}
		}
		return got == len(evs), got
	})
	return lines
}

// waitCommitted waits until the group committed every partition's end. It
// fails when the committed offsets stay the same for stallTimeout.
func (e *env) waitCommitted() {
	e.t.Helper()
	waitProgress(e.t, "the offsets to be committed up to the end", stallTimeout, func() (bool, int) {
		ends := e.broker.EndOffsets(e.t, testTopic)
		committed := e.broker.Committed(e.t, DefaultGroup, testTopic)
		done, sum := true, 0
		for p, end := range ends {
			if end > 0 && committed[p] != end {
				done = false
			}
			sum += int(committed[p])
		}
		return done, sum
	})
}

// checkOrder checks that the events of each tenant were handled in the
// order they were produced: archive lines and http calls by increasing seq.
func checkOrder(t testing.TB, lines []archived, calls []call) {
	t.Helper()
	last := map[string]int{}
	for _, l := range lines {
		if prev, ok := last[l.tenant]; ok && l.seq <= prev {
			t.Errorf("tenant %s: archive line of seq %d after seq %d", l.tenant, l.seq, prev)
		}
		last[l.tenant] = l.seq
	}
	last = map[string]int{}
	for _, c := range calls {
		if c.Path == "/fail" {
			continue
		}
		if prev, ok := last[c.Tenant]; ok && c.Seq <= prev {
			t.Errorf("tenant %s: http call of seq %d after seq %d", c.Tenant, c.Seq, prev)
		}
		last[c.Tenant] = c.Seq
	}
}

func TestService_ProcessesEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	idx := e.deploy("v1")
	cfg := e.config()
	// The first master refuses connections: the engine moves on.
	cfg.MasterURLs = []string{"http://127.0.0.1:1", e.masters.URL(0)}
	r := startReady(t, cfg)

	code, st := r.readyz()
	if code != http.StatusOK || st.TreeIndex != idx || !st.Joined || !slices.Equal(st.Partitions, []int{0, 1, 2}) {
		t.Fatalf("/readyz %d %+v, want tree %d and partitions 0-2", code, st, idx)
	}
	if code, _ := r.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}

	evs := orders(300, 5)
	newID := func() string { return uuid.Must(uuid.NewV7()).String() }
	poison := event{id: newID(), tenant: "tenant-0", raw: []byte("not json {")}
	nagios := event{id: newID(), tenant: "tenant-1", typ: "nagios", seq: 1000}
	flaky := event{id: newID(), tenant: "tenant-2", typ: "flaky", seq: 1000}
	e.produce(evs[:100]...)
	e.produce(poison, nagios, flaky)
	e.produce(evs[100:]...)
	// The satellite sent evs[7] again (say its ack was lost): same id.
	e.produce(evs[7])

	lines := e.waitArchived(evs)
	polltest.Wait(t, "the dead letters", processTimeout, func() bool { return r.counter("squall_engine_dlq_messages_total") == 3 })
	e.waitCommitted()
	if got := r.counter("squall_engine_events_deduplicated_total"); got != 1 {
		t.Errorf("%v events deduplicated, want 1", got)
	}

	// Exactly once (one engine, no rebalance, the duplicate skipped), in
	// order per tenant, by v1.
	var orderLines []archived
	for _, l := range lines {
		if l.id == flaky.id {
			continue // the flaky rule archives too, after its failing http call
		}
		orderLines = append(orderLines, l)
		if l.version != "v1" {
			t.Errorf("event %s archived under %s", l.id, l.version)
		}
		if l.traceID != testTraceID {
			t.Errorf("event %s archived with trace_id %v, want the traceparent's %s", l.id, l.traceID, testTraceID)
		}
	}
	for id, n := range countIDs(orderLines) {
		if n != 1 {
			t.Errorf("event %s archived %d times", id, n)
		}
	}
	if len(orderLines) != len(evs) {
		t.Errorf("%d archive lines for %d events", len(orderLines), len(evs))
	}
	calls := e.receiver.Calls()
	var v1Calls []call
	for _, c := range calls {
		if c.Path == "/v1" {
			v1Calls = append(v1Calls, c)
		}
		if c.Path == "/v1" && c.Tree != "v1" {
			t.Errorf("call %+v", c)
		}
	}
	if len(v1Calls) != len(evs) {
		t.Errorf("%d http calls for %d events", len(v1Calls), len(evs))
	}
	checkOrder(t, orderLines, calls)
	if n := countIDs(lines)[flaky.id]; n != 1 {
		t.Errorf("the flaky event's archive action ran %d times, want once", n)
	}

	// The dead letters: the original record with the reason.
	dlq := e.broker.Records(t, testDLQ)
	if len(dlq) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dlq))
	}
	byID := map[string]map[string]string{}
	for _, rec := range dlq {
		id, _ := rec.Header(HeaderEventID)
		h := map[string]string{"key": rec.Key, "value": string(rec.Value)}
		for _, hd := range rec.Headers {
			h[hd.Key] = hd.Value
		}
		byID[id] = h
	}
	checkDLQ := func(ev event, stage, actions, reason string) {
		t.Helper()
		h, ok := byID[ev.id]
		if !ok {
			t.Errorf("event %s (%s) not dead-lettered", ev.id, ev.typ)
			return
		}
		if h["key"] != ev.tenant || h["squall-source"] != "sat-test" || h["traceparent"] == "" {
			t.Errorf("dead letter of %s lost its key or headers: %v", ev.id, h)
		}
		if h[HeaderErrorStage] != stage || h[HeaderErrorActions] != actions || !strings.Contains(h[HeaderError], reason) {
			t.Errorf("dead letter of %s: stage %q actions %q error %q, want %s %q %q",
				ev.id, h[HeaderErrorStage], h[HeaderErrorActions], h[HeaderError], stage, actions, reason)
		}
		if h[HeaderTreeIndex] != fmt.Sprint(idx) || !strings.HasPrefix(h[HeaderOrigin], testTopic+"/") {
			t.Errorf("dead letter of %s: tree %q origin %q", ev.id, h[HeaderTreeIndex], h[HeaderOrigin])
		}
	}
	checkDLQ(poison, "decode", "", "invalid event")
	checkDLQ(nagios, "action", "0:nagios", "no executor")
	checkDLQ(flaky, "action", "0:http", "500")
	for _, h := range byID {
		if h[HeaderEngine] != "engine-test" || h[HeaderDeadAt] == "" || h[HeaderOriginTime] == "" {
			t.Errorf("dead letter without its engine or times: %v", h)
		}
	}
	if got := byID[flaky.id][HeaderErrorRules]; got != "root/all/flaky/0" {
		t.Errorf("flaky dead letter: rules %q, want root/all/flaky/0", got)
	}
	// Tracing is off: the logs of an event carry its traceparent's trace id.
	for _, line := range strings.Split(r.log.String(), "\n") {
		if strings.Contains(line, `msg="event dead-lettered"`) && !strings.Contains(line, "trace_id="+testTraceID) {
			t.Errorf("dead letter log line without the event's trace id: %s", line)
		}
	}
	if v := byID[poison.id]["value"]; v != "not json {" {
		t.Errorf("poison value %q", v)
	}

	for name, want := range map[string]float64{
		"squall_engine_events_processed_total":    300,
		"squall_engine_events_failed_total":       3,
		"squall_engine_events_deduplicated_total": 1,
		"squall_engine_tree_index":                float64(idx),
		"squall_engine_tree_updates_total":        1,
		"squall_engine_assigned_partitions":       3,
		"squall_engine_ready":                     1,
	} {
		if got := r.counter(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{"squall_engine_stage_duration_seconds", "squall_engine_commits_total",
		"squall_action_executed_total", "squall_engine_watch_errors_total"} {
		if r.counter(name) == 0 {
			t.Errorf("%s is 0", name)
		}
	}
	if _, body := r.get("/metrics"); !strings.Contains(string(body), `squall_engine_stage_duration_seconds_bucket{stage="evaluate"`) ||
		!strings.Contains(string(body), `squall_action_failed_total{action="http",reason="exhausted"} 1`) {
		t.Errorf("/metrics lacks the stage or action metrics")
	}

	// A clean stop commits everything and leaves the group.
	r.stop()
	if st := r.Assignment(); st.Joined {
		t.Errorf("still joined after stop: %+v", st)
	}
}

// TestService_PartitionLag: squall_engine_partition_lag shows the records
// waiting behind the last one fetched, and falls to 0 once they are
// processed.
func TestService_PartitionLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.deploy("v1")
	// Actions wait for the receiver rather than time out while it holds.
	writeFile(t, e.actions, fmt.Sprintf(`{"archive": {"base_path": %q, "default_path": "/other.log", "paths": {"v1": "/v1/${tenant}.log"}},
		"http": {"timeout": "60s", "allowed_hosts": ["127.0.0.1"]}}`, e.archive))
	release := e.receiver.hold()
	defer release()
	evs := orders(40, 1)
	e.produce(evs...)
	cfg := e.config()
	cfg.Workers, cfg.QueueSize = 1, 1
	r := startReady(t, cfg)
	// The worker waits in the first event's http call and the fetch loop
	// on the full queue: a few events fetched, the rest behind them.
	polltest.Wait(t, "the lag of the waiting events", processTimeout, func() bool {
		return r.counter("squall_engine_partition_lag") >= float64(len(evs)-5)
	})
	release()
	e.waitArchived(evs)
	polltest.Wait(t, "a lag of 0", processTimeout, func() bool {
		return r.counter("squall_engine_partition_lag") == 0 && r.counter("squall_engine_events_processed_total") == float64(len(evs))
	})
	if got := metricLabels(t, r.reg, "squall_engine_partition_lag"); got != "partition=0" {
		t.Errorf("lag gauges %q, want one of partition 0", got)
	}
}

// metricLabels lists the label pairs of a metric's series.
func metricLabels(t testing.TB, g prometheus.Gatherer, name string) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+"="+l.GetValue())
			}
			out = append(out, strings.Join(pairs, ","))
		}
	}
	return strings.Join(out, " ")
}

func TestService_RedeployMidStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	i1 := e.deploy("v1")
	r := startReady(t, e.config())

	evs := orders(2000, 8)
	e.produce(evs[:1000]...)
	polltest.Wait(t, "the first events", processTimeout, func() bool { return len(e.archivedEvents()) >= 200 })
	i2 := e.deploy("v2")
	e.produce(evs[1000:]...)
	lines := e.waitArchived(evs)
	e.waitCommitted()

	if r.TreeIndex() != i2 || i2 <= i1 {
		t.Fatalf("tree %d, want %d (> %d)", r.TreeIndex(), i2, i1)
	}
	// Each event handled once, by exactly one tree; per tenant, v1 then v2.
	for id, n := range countIDs(lines) {
		if n != 1 {
			t.Errorf("event %s archived %d times", id, n)
		}
	}
	calls := e.receiver.Calls()
	if len(calls) != len(evs) {
		t.Errorf("%d http calls for %d events", len(calls), len(evs))
	}
	version := map[string]string{}
	for _, l := range lines {
		version[l.id] = l.version
	}
	count := map[string]int{}
	lastVersion := map[string]string{}
	for _, c := range calls {
		count[c.Tree]++
		if c.Tree != version[c.ID] || c.Path != "/"+c.Tree {
			t.Errorf("event %s: archived by %s, posted by %s to %s", c.ID, version[c.ID], c.Tree, c.Path)
		}
		if lastVersion[c.Tenant] == "v2" && c.Tree == "v1" {
			t.Errorf("tenant %s: an event handled by v1 after one handled by v2", c.Tenant)
		}
		lastVersion[c.Tenant] = c.Tree
	}
	if count["v1"] == 0 || count["v2"] == 0 {
		t.Errorf("events by tree: %v, want both", count)
	}
	t.Logf("events by tree: %v", count)
	slices.SortStableFunc(lines, func(a, b archived) int { return strings.Compare(a.tenant, b.tenant) })
	checkOrder(t, nil, calls)
	if got := r.counter("squall_engine_tree_updates_total"); got != 2 {
		t.Errorf("%v tree updates, want 2", got)
	}
}

func TestService_CrashLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.deploy("v1")
	cfg := e.config()
	a := startReady(t, cfg)

	evs := orders(3000, 6)
	e.produce(evs[:1500]...)
	polltest.Wait(t, "some events processed", processTimeout, func() bool { return len(e.archivedEvents()) >= 300 })
	a.kill()
	before := len(e.archivedEvents())
	e.produce(evs[1500:]...)

	b := start(t, cfg)
	lines := e.waitArchived(evs)
	e.waitCommitted()
	dups := 0
	for _, n := range countIDs(lines) {
		dups += n - 1
	}
	t.Logf("engine a archived %d events before its crash; %d events ran twice; a abandoned %v",
		before, dups, a.counter("squall_engine_events_abandoned_total"))
	if got := b.counter("squall_engine_events_processed_total"); got < float64(len(evs)-before) {
		t.Errorf("engine b processed %v events, want at least %d", got, len(evs)-before)
	}
}

func TestService_TwoEnginesSplitPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 6)
	e.deploy("v1")
	cfg := e.config()
	a := startReady(t, cfg)
	// Engine a alone fetches from all 6 partitions first: it reports their
	// lag until b takes half of them.
	evs := orders(1200, 24)
	e.produce(evs[:120]...)
	e.waitArchived(evs[:120])
	// Committed before b joins: none of them is delivered again.
	e.waitCommitted()
	if got := metricLabels(t, a.reg, "squall_engine_partition_lag"); strings.Count(got, "partition=") != 6 {
		t.Fatalf("engine a alone: lag gauges %q, want 6", got)
	}
	b := start(t, cfg)
	polltest.Wait(t, "the engines to share the partitions", readyTimeout, func() bool {
		pa, pb := a.Assignment(), b.Assignment()
		if !pa.Joined || !pb.Joined || len(pa.Partitions) != 3 || len(pb.Partitions) != 3 {
			return false
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(pa.Partitions), pb.Partitions...)))
		return slices.Equal(all, []int{0, 1, 2, 3, 4, 5})
	})

	e.produce(evs[120:]...)
	lines := e.waitArchived(evs)
	e.waitCommitted()
	for _, r := range []*runner{a, b} {
		var want []string
		for _, p := range r.Assignment().Partitions {
			want = append(want, fmt.Sprint("partition=", p))
		}
		if got := metricLabels(t, r.reg, "squall_engine_partition_lag"); got != strings.Join(want, " ") {
			t.Errorf("lag gauges %q, want those of the assigned partitions %v", got, r.Assignment().Partitions)
		}
	}
	na, nb := a.counter("squall_engine_events_processed_total"), b.counter("squall_engine_events_processed_total")
	if na == 0 || nb == 0 || na+nb < float64(len(evs)) {
		t.Errorf("engine a processed %v, b %v, of %d", na, nb, len(evs))
	}
	for id, n := range countIDs(lines) {
		if n != 1 {
			t.Errorf("event %s archived %d times", id, n)
		}
	}
	checkOrder(t, nil, e.receiver.Calls())
	t.Logf("engine a: partitions %v, %v events; engine b: partitions %v, %v events",
		a.Assignment().Partitions, na, b.Assignment().Partitions, nb)
}

func TestService_WaitsForMaster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	idx := e.deploy("v1")
	e.masters.Kill(0)
	r := start(t, e.config())
	evs := orders(50, 3)
	e.produce(evs...)

	polltest.Wait(t, "failed watch requests", readyTimeout, func() bool { return r.counter("squall_engine_watch_errors_total") >= 3 })
	if code, st := r.readyz(); code != http.StatusServiceUnavailable || st.Ready || st.TreeIndex != 0 || st.Joined {
		t.Fatalf("without a master: /readyz %d %+v", code, st)
	}
	if n := len(e.archivedEvents()); n != 0 {
		t.Fatalf("%d events processed without a tree", n)
	}

	e.masters.Restart(0)
	waitReady(t, r)
	if r.TreeIndex() != idx {
		t.Errorf("tree %d, want %d", r.TreeIndex(), idx)
	}
	e.waitArchived(evs)
}

// TestService_NotReadyReasons: /readyz and the log say why an engine does
// not process events: no tree deployed, a master that refuses the token,
// no master reachable; and a ready engine has no reason.
func TestService_NotReadyReasons(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	reasonIs := func(r *runner, want string) func() bool {
		return func() bool {
			code, st := r.readyz()
			return code == http.StatusServiceUnavailable && len(st.Reasons) == 1 && strings.Contains(st.Reasons[0], want)
		}
	}
	const quick = 50 * time.Millisecond

	cfg := e.config()
	cfg.NotReadyLogInterval = quick
	noTree := start(t, cfg)
	polltest.Wait(t, "the reason: no tree deployed", readyTimeout, reasonIs(noTree, "no tree deployed"))
	polltest.Wait(t, "the reason repeated in the log", readyTimeout, func() bool {
		return strings.Count(noTree.log.String(), "no tree deployed") >= 2
	})

	cfg = e.config()
	cfg.NotReadyLogInterval = quick
	cfg.Token = e.masters.Token(auth.Claims{User: "engine", Auths: map[string]auth.Authorization{
		"acme": {Path: []string{"root", "acme"}, Roles: []string{string(auth.View)}},
	}})
	badToken := start(t, cfg)
	polltest.Wait(t, "the reason: the token is refused", readyTimeout, reasonIs(badToken, "refuses the engine's token (403"))

	cfg = e.config()
	cfg.NotReadyLogInterval = quick
	cfg.MasterURLs = []string{"http://127.0.0.1:1"}
	noMaster := start(t, cfg)
	polltest.Wait(t, "the reason: no master", readyTimeout, reasonIs(noMaster, "master unreachable"))
	polltest.Wait(t, "the reason in the log", readyTimeout, func() bool {
		return strings.Contains(noMaster.log.String(), "engine not ready") && strings.Contains(noMaster.log.String(), "master unreachable")
	})

	e.deploy("v1")
	cfg = e.config()
	cfg.Brokers = []string{"127.0.0.1:1"}
	noKafka := start(t, cfg)
	polltest.Wait(t, "the reason: Kafka unreachable", readyTimeout, reasonIs(noKafka, "Kafka unreachable"))

	waitReady(t, noTree)
	if code, st := noTree.readyz(); code != http.StatusOK || len(st.Reasons) != 0 || st.Reasons == nil {
		t.Errorf("ready engine: /readyz %d %+v, want no reason (an empty list)", code, st)
	}
}

func TestService_RefusesTreeThatDoesNotCompile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	// A master that serves what its own validation would refuse: as a
	// master of another version could. The engine talks to it over HTTP.
	stub := newStubMaster()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	tree := func(version string) string {
		return strings.NewReplacer("VERSION", version, "RECEIVER", e.receiver.URL).Replace(testTree)
	}
	stub.set(1, tree("v1"))
	cfg := e.config()
	cfg.MasterURLs = []string{srv.URL}
	cfg.Token = stub.token
	r := startReady(t, cfg)

	first := orders(40, 4)
	e.produce(first...)
	e.waitArchived(first)

	stub.set(2, badTree)
	polltest.Wait(t, "the refusal", processTimeout, func() bool {
		return r.counter("squall_engine_tree_compile_failures_total") == 1
	})
	second := orders(40, 4)
	e.produce(second...)
	lines := e.waitArchived(second)
	for _, l := range lines {
		if l.version != "v1" {
			t.Errorf("event %s archived under %s", l.id, l.version)
		}
	}
	if code, st := r.readyz(); code != http.StatusOK || st.TreeIndex != 1 || r.counter("squall_engine_tree_index") != 1 {
		t.Errorf("after the refusal: /readyz %d %+v", code, st)
	}

	stub.set(3, tree("v3"))
	polltest.Wait(t, "tree 3", processTimeout, func() bool { return r.TreeIndex() == 3 })
	third := orders(40, 4)
	e.produce(third...)
	lines = e.waitArchived(third)
	n := 0
	for _, l := range lines {
		if l.version == "v3" {
			n++
		}
	}
	if n != len(third) {
		t.Errorf("%d events archived by v3, want %d", n, len(third))
	}
}
