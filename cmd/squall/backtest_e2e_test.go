package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/backtests"
)

// btTree is the tree of TestBacktestAndDeadLetters: rules r1, r2 and r3
// match the events of the kinds KIND1, KIND2 and KIND3; notify posts the
// events of kind x to the receiver.
const btTree = `{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "all", "rules": [
    {"name": "r1", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.kind}", "second": "KIND1"}, "WITH": {}}, "actions": []},
    {"name": "r2", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.kind}", "second": "KIND2"}, "WITH": {}}, "actions": []},
    {"name": "r3", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.kind}", "second": "KIND3"}, "WITH": {}}, "actions": []},
    {"name": "notify", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.kind}", "second": "x"}, "WITH": {}},
     "actions": [{"id": "http", "payload": {"url": "RECEIVER_URL", "body": {"id": "${event.payload.id}"}}}]}
  ]}}]}}`

// btKinds: the active tree's rules match a, b and c; the draft changes
// r2 to c and r3 to d.
var (
	btActive = [3]string{"a", "b", "c"}
	btDraft  = [3]string{"a", "c", "d"}
)

func btTreeJSON(kinds [3]string, receiver string) []byte {
	return []byte(strings.NewReplacer("KIND1", kinds[0], "KIND2", kinds[1], "KIND3", kinds[2], "RECEIVER_URL", receiver).Replace(btTree))
}

// btKind is the kind of the i-th webhook: of ten, 4 a, 2 b, 3 c, 1 d.
func btKind(i int) string { return string("aaaabbcccd"[i%10]) }

// flakyReceiver answers the http action 500 while failing is set, and
// counts the actions it accepted per id.
type flakyReceiver struct {
	url     string
	failing atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	ok      map[string]int
}

func newFlakyReceiver(t *testing.T) *flakyReceiver {
	rx := &flakyReceiver{ok: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if rx.failing.Load() {
			rx.refused.Add(1)
			http.Error(w, "down for the test", http.StatusInternalServerError)
			return
		}
		rx.mu.Lock()
		rx.ok[body.ID]++
		rx.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rx.url = srv.URL + "/action"
	return rx
}

func (rx *flakyReceiver) accepted(id string) int {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return rx.ok[id]
}

// TestBacktestAndDeadLetters runs issue 29's scenario with real processes
// (a master, an engine, a satellite, and a Kafka-protocol broker in this
// process): webhooks sent through the satellite; a draft that changes two
// rules; squall backtest --master, which an engine runs, counts per rule
// what this test computes from the webhooks it sent. Then a webhook whose
// action fails is dead-lettered, the action is fixed, the dead letter is
// replayed twice with squall deadletters, and the action sees it once.
func TestBacktestAndDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with real processes: skipped in -short mode")
	}
	t.Parallel()
	const n = 300
	const events, dlq = "squall.events", "squall.events.dlq"
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{events, dlq}, Partitions: 3})
	rx := newFlakyReceiver(t)
	bin := squallBinary(t)
	dir := t.TempDir()
	base := startMaster(t, "--kafka-brokers", b.Addr, "--allow-unsigned-tokens")
	adminFile, admin := adminTokenFile(t, dir)
	engineToken := filepath.Join(dir, "engine.token")
	writeFile(t, engineToken, mustRun(t, "token", "--user", "engine", "--auth", "all=root:view,fleet_report", "--unsigned"))
	apitest.DeployTree(t, base, admin, btTreeJSON(btActive, rx.url))

	actions := filepath.Join(dir, "actions.json")
	writeFile(t, actions, `{"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]}, "retry": {"max_attempts": 2, "base_delay": "50ms", "max_delay": "100ms", "jitter": 0}}`)
	engine := startE2E(t, "engine", "engine", "--name", "engine-1", "--master", base,
		"--token-file", engineToken, "--kafka-brokers", b.Addr, "--http", "127.0.0.1:0", "--actions-config", actions, "--fleet-interval", "1s")
	hooks := filepath.Join(dir, "webhooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(hooks, "bt.json"), `{"id": "bt", "token": "token-0123456789-bt", "tenant_id": "tenant-1",
	  "collector_config": {"event_type": "bt", "payload": {"id": "${id}", "kind": "${kind}"}}}`)
	sat := startE2E(t, "sat", "satellite", "--http", "127.0.0.1:0", "--name", "sat",
		"--webhooks-dir", hooks, "--kafka-brokers", b.Addr, "--spool-dir", filepath.Join(dir, "spool"))
	procs := []*proctest.Proc{engine, sat}
	proctest.Wait(t, e2eStartupTimeout, "the engine and the satellite ready", procs, func() bool {
		return engineStatus(engine).Ready && satelliteStatus(sat).Ready
	})
	send := func(id, kind string) {
		t.Helper()
		body := fmt.Sprintf(`{"id": %q, "kind": %q}`, id, kind)
		if code, resp := apitest.Call(t.Context(), http.MethodPost, sat.Base+"/engine/webhook/event/bt?token=token-0123456789-bt", "", strings.NewReader(body), "application/json"); code != http.StatusOK {
			t.Fatalf("webhook %s: %d %s", id, code, resp)
		}
	}
	for i := range n {
		send(fmt.Sprintf("bt-%d", i), btKind(i))
	}
	topicEvents := func(topic string) int64 {
		var sum int64
		for _, end := range b.EndOffsets(t, topic) {
			sum += end
		}
		return sum
	}
	proctest.Wait(t, 30*time.Second, "the webhooks' events in Kafka", procs, func() bool { return topicEvents(events) == n })

	// The draft changes r2 and r3.
	draftID, code, body := apitest.ImportTree(t, base, admin, "root", btTreeJSON(btDraft, rx.url))
	if code != http.StatusOK {
		t.Fatalf("import the draft: %d %s", code, body)
	}
	want := map[string][2]int64{}
	for i := range n {
		for r := range 3 {
			name := fmt.Sprintf("root/all/r%d", r+1)
			v := want[name]
			if btActive[r] == btKind(i) {
				v[0]++
			}
			if btDraft[r] == btKind(i) {
				v[1]++
			}
			want[name] = v
		}
	}
	want["root/all/notify"] = [2]int64{0, 0}
	out, err := exec.CommandContext(t.Context(), bin, "backtest", "--master", base, "--token-file", adminFile, "--draft", draftID, "--last", "1h", "--json").Output()
	if err != nil {
		t.Fatalf("squall backtest: %v\n%s", err, proctest.Tails(procs))
	}
	var bt backtests.Backtest
	if err := json.Unmarshal(out, &bt); err != nil || bt.Result == nil {
		t.Fatalf("squall backtest --json: %v\n%s", err, out)
	}
	got := map[string][2]int64{}
	for _, rc := range bt.Result.Rules {
		got[rc.Rule] = [2]int64{rc.Active, rc.Candidate}
	}
	if !maps.Equal(got, want) {
		t.Errorf("per-rule counts (active, draft)\n got %v\nwant %v", got, want)
	}
	if bt.State != backtests.StateSucceeded || bt.Engine != "engine-1" || bt.Result.Events != n || bt.Result.DifferingEvents != n*6/10 ||
		!slices.Equal(bt.Result.DifferingRules, []string{"root/all/r2", "root/all/r3"}) {
		t.Errorf("backtest %s: state %s on %q, %d events, %d differing, differing rules %v", bt.ID, bt.State, bt.Engine,
			bt.Result.Events, bt.Result.DifferingEvents, bt.Result.DifferingRules)
	}
	// The text form names the two rules.
	text := mustRun(t, "backtest", "--master", base, "--token-file", adminFile, "--draft", draftID, "--last", "1000")
	if !strings.Contains(text, "2 rules whose match counts differ") || !strings.Contains(text, "root/all/r2") || !strings.Contains(text, "succeeded on engine engine-1") {
		t.Errorf("squall backtest:\n%s", text)
	}
	t.Logf("backtest of %d events on %s: %.0f events/s", bt.Result.Events, bt.Engine, bt.Result.Rate)

	// A dead letter: the action fails past its retries.
	rx.failing.Store(true)
	send("dl-1", "x")
	proctest.Wait(t, 30*time.Second, "the failed action's event dead-lettered", procs, func() bool { return topicEvents(dlq) == 1 })
	recs := b.Records(t, dlq)
	id := fmt.Sprintf("%s/%d/%d", dlq, recs[0].Partition, recs[0].Offset)
	if list := mustRun(t, "deadletters", "list", "--since", "1h", "--master", base, "--token-file", adminFile); !strings.Contains(list, id) {
		t.Fatalf("deadletters list has no %s:\n%s", id, list)
	}
	// Fixed; replayed twice, produced once, and the action sees it once.
	rx.failing.Store(false)
	for i, wantOut := range []string{"\treplayed\t", "\talready_replayed\t"} {
		if out := mustRun(t, "deadletters", "replay", id, "--master", base, "--token-file", adminFile); !strings.Contains(out, id+wantOut) {
			t.Errorf("replay %d:\n%s", i, out)
		}
	}
	proctest.Wait(t, 30*time.Second, "the replayed event's action", procs, func() bool { return rx.accepted("dl-1") > 0 })
	if got := topicEvents(events); got != n+2 {
		t.Errorf("%d events in %s, want %d: the webhooks, dl-1, and one replay", got, events, n+2)
	}
	if got := rx.accepted("dl-1"); got != 1 || rx.refused.Load() != 2 {
		t.Errorf("the action accepted dl-1 %d times (refused %d), want once (refused twice)", got, rx.refused.Load())
	}
}
