package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/panics"
	"github.com/squallhq/squall/internal/polltest"
)

// TestService_ContainsAPanicToItsEvent: while the tree in use panics on
// every event, each event is dead-lettered (stage evaluate) and counted,
// the engine stays up and ready, and the next tree processes the next
// events.
func TestService_ContainsAPanicToItsEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	idx := e.deploy("v1")
	r := startReady(t, e.config())
	first := orders(20, 4)
	e.produce(first...)
	e.waitArchived(first)

	// A tree whose evaluation panics: a nil tree does, in Actions. No
	// valid tree should; the engine must survive one that does.
	r.install(treeVersion{tree: (*tree.Tree)(nil), index: idx + 100})
	poisoned := orders(5, 2)
	e.produce(poisoned...)
	polltest.Wait(t, "the events of the panicking tree dead-lettered", processTimeout, func() bool {
		return r.counter("squall_engine_dlq_messages_total") == float64(len(poisoned))
	})
	stages := map[string]int{}
	for _, rec := range e.broker.Records(t, testDLQ) {
		stage, _ := rec.Header(HeaderErrorStage)
		reason, _ := rec.Header(HeaderError)
		stages[stage]++
		if !strings.Contains(reason, "evaluating the event panicked") {
			t.Errorf("dead letter reason %q", reason)
		}
	}
	if stages[failEvaluate] != len(poisoned) {
		t.Errorf("dead letters by stage %v, want %d evaluate", stages, len(poisoned))
	}
	if got := r.counter("squall_engine_panics_total"); got != float64(len(poisoned)) {
		t.Errorf("squall_engine_panics_total = %v, want %d", got, len(poisoned))
	}
	if code, _ := r.readyz(); code != http.StatusOK {
		t.Errorf("/readyz %d while events panic", code)
	}
	if n := strings.Count(r.log.String(), `msg="panic contained to one event"`); n != len(poisoned) {
		t.Errorf("%d panic log lines, want %d", n, len(poisoned))
	}
	if !strings.Contains(r.log.String(), "stack=") {
		t.Error("the panic's log line has no stack")
	}

	// The next tree from the masters takes over.
	e.deploy("v2")
	polltest.Wait(t, "tree v2", processTimeout, func() bool { return r.TreeIndex() != idx+100 })
	next := orders(20, 4)
	e.produce(next...)
	ids := map[string]bool{}
	for _, ev := range next {
		ids[ev.id] = true
	}
	for _, l := range e.waitArchived(next) {
		if ids[l.id] && l.version != "v2" {
			t.Errorf("event %s archived by %s after the panicking tree", l.id, l.version)
		}
	}
}

func TestCompileWith_ContainsAPanic(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"version":"1.1","Filter":{"name":"root","filter":{"description":"","active":true,"filter":{}},"nodes":[]}}`)
	boom := func(*config.Node) (*tree.Tree, error) { panic("the compiler's bug") }
	tr, err := compileWith(raw, boom)
	if _, ok := errors.AsType[*panics.Error](err); tr != nil || !ok || !strings.Contains(err.Error(), "the compiler's bug") {
		t.Fatalf("compileWith: %v %v", tr, err)
	}
	if tr, err := compileWith(raw, tree.Compile); err != nil || tr == nil {
		t.Fatalf("a tree that compiles: %v", err)
	}
}

func TestRunAction_ContainsAPanic(t *testing.T) {
	t.Parallel()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	// No registry: running an action dereferences nil, a real panic.
	s := &Service{m: m, log: slog.New(slog.NewTextHandler(&logs, nil))}
	err = s.runAction(context.Background(), &kafkasource.Message{}, []byte("ev-1"), tree.Action{ID: "logger"})
	if _, ok := errors.AsType[*panics.Error](err); !ok {
		t.Fatalf("runAction: %T %v", err, err)
	}
	if got := testCounter(m.panics.WithLabelValues(panicAction)); got != 1 {
		t.Errorf("panics{where=action} = %v", got)
	}
	if !strings.Contains(logs.String(), "event_id=ev-1") || !strings.Contains(logs.String(), "where=action") {
		t.Errorf("log: %s", logs.String())
	}
}

// TestService_RefusedTreeIsReported: an engine that refuses the active
// tree says so on /readyz (a warning: it goes on with the previous tree)
// and in its fleet report, until a later tree is installed.
func TestService_RefusedTreeIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	stub := newStubMaster()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	stub.set(1, strings.NewReplacer("VERSION", "v1", "RECEIVER", e.receiver.URL).Replace(testTree))
	cfg := e.config()
	cfg.MasterURLs = []string{srv.URL}
	cfg.Token = stub.token
	r := startReady(t, cfg)

	stub.set(2, badTree)
	polltest.Wait(t, "the refusal", processTimeout, func() bool {
		return r.counter("squall_engine_tree_compile_failures_total") == 1
	})
	code, st := r.readyz()
	want := "the active tree (index 2) was refused"
	if code != http.StatusOK || !st.Ready || len(st.Warnings) == 0 || !strings.Contains(strings.Join(st.Warnings, "; "), want) {
		t.Errorf("/readyz %d %+v, want ready with the warning %q", code, st, want)
	}
	if !strings.Contains(strings.Join(st.Warnings, "; "), "index 1") {
		t.Errorf("the warning does not name the tree in use: %v", st.Warnings)
	}
	ready, reasons, warnings := r.Readiness()
	if !ready || len(reasons) != 0 || !strings.Contains(strings.Join(warnings, "; "), want) {
		t.Errorf("Readiness: %v %v %v", ready, reasons, warnings)
	}
	if n := strings.Count(r.log.String(), "tree refused"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}

	stub.set(3, strings.NewReplacer("VERSION", "v3", "RECEIVER", e.receiver.URL).Replace(testTree))
	polltest.Wait(t, "tree 3", processTimeout, func() bool { return r.TreeIndex() == 3 })
	if _, st := r.readyz(); len(st.Warnings) != 0 {
		t.Errorf("the warning outlived the next tree: %v", st.Warnings)
	}
}
