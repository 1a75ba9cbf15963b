package engine

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/node"
)

// alertTree posts every event of type alert to RECEIVER/alert.
const alertTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "all", "rules": [
    {"name": "notify", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "alert"}, "WITH": {}},
     "actions": [{"id": "http", "payload": {"url": "RECEIVER/alert", "id": "${event.payload.id}"}}]}
  ]}}]}}`

// target is an http action's target that fails (500) until fixed, and
// counts the calls it accepted per event id.
type target struct {
	*httptest.Server
	mu       sync.Mutex
	failing  bool
	failed   map[string]int
	accepted map[string]int
}

func newTarget(t *testing.T) *target {
	tg := &target{failing: true, failed: map[string]int{}, accepted: map[string]int{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		tg.mu.Lock()
		defer tg.mu.Unlock()
		if tg.failing {
			tg.failed[body.ID]++
			http.Error(w, "target down", http.StatusInternalServerError)
			return
		}
		tg.accepted[body.ID]++
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) fail(on bool) {
	tg.mu.Lock()
	tg.failing = on
	tg.mu.Unlock()
}

func (tg *target) counts(id string) (failed, accepted int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.failed[id], tg.accepted[id]
}

// TestDeadLetters_FixAndReplay runs the whole round: an event whose
// action target fails is dead-lettered with its reason; the masters' API
// lists it; once the target is fixed, it is replayed and the target sees
// it once, however often it is replayed; an event replayed too often
// stays dead.
func TestDeadLetters_FixAndReplay(t *testing.T) {
	t.Parallel()
	dlCfg := deadletters.Default()
	dlCfg.MaxReplays = 2
	var closers []func() error
	e := newEnv(t, 2, func(e *env, s *master.Server) {
		// As squall master mounts it.
		a, closeAPI, err := node.NewDeadLetterAPI(dlCfg, kafkasource.Dial{Brokers: []string{e.broker.Addr}, Timeout: 2 * time.Second}, s.Verifier(), nil)
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, closeAPI)
		if err := node.MountDeadLetters(s, a.Handler()); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		for _, c := range closers {
			if err := c(); err != nil {
				t.Error(err)
			}
		}
	})
	tg := newTarget(t)
	e.deployExport(strings.ReplaceAll(alertTree, "RECEIVER", tg.URL))
	r := startReady(t, e.config())
	ops := "Bearer " + e.masters.Token(auth.Claims{User: "ops", Auths: map[string]auth.Authorization{
		"root": {Path: []string{"root"}, Roles: []string{string(auth.DeadLettersReplay)}},
	}})
	api := func(method, path string, body, out any) {
		t.Helper()
		calltest.JSON(t, method, e.masters.URL(0)+path, ops, body, out)
	}
	list := func(query string) *deadletters.Page {
		t.Helper()
		var p deadletters.Page
		api(http.MethodGet, deadletters.Prefix+query, nil, &p)
		return &p
	}
	replay := func(ids ...string) []deadletters.ReplayResult {
		t.Helper()
		var a deadletters.ReplayAnswer
		api(http.MethodPost, deadletters.Prefix+"/replay", deadletters.ReplayRequest{IDs: ids}, &a)
		return a.Results
	}
	alert := func() event {
		return event{id: uuid.Must(uuid.NewV7()).String(), tenant: "tenant-1", typ: "alert"}
	}
	dlq := func() float64 { return r.counter("squall_engine_dlq_messages_total") }

	// 1. The target fails: the event is dead-lettered, with its reason.
	ev := alert()
	e.produce(ev)
	polltest.Wait(t, "the dead letter", processTimeout, func() bool { return dlq() == 1 })
	p := list("?reason=action+http")
	if len(p.DeadLetters) != 1 || len(p.Reasons) != 1 || p.Reasons[0].Count != 1 {
		t.Fatalf("list: %+v", p)
	}
	l := p.DeadLetters[0]
	if l.EventID != ev.id || l.Stage != deadletter.StageAction || !strings.Contains(l.Error, "500") ||
		l.Engine != "engine-test" || len(l.Rules) != 1 || l.Rules[0] != "root/all/notify/0" ||
		!strings.HasPrefix(l.Origin, testTopic+"/") || l.Webhook != "test" || l.ReplayCount != 0 {
		t.Errorf("dead letter: %+v", l)
	}
	var shown deadletters.Letter
	api(http.MethodGet, deadletters.Prefix+"/"+l.ID, nil, &shown)
	if !strings.Contains(string(shown.Event), `"type":"alert"`) {
		t.Errorf("shown event %s", shown.Event)
	}

	// 2. Fixed, replayed twice: produced once, seen by the target once.
	tg.fail(false)
	if res := replay(l.ID); res[0].Status != deadletters.StatusReplayed || res[0].ReplayCount != 1 {
		t.Fatalf("replay: %+v", res)
	}
	if res := replay(l.ID); res[0].Status != deadletters.StatusAlreadyReplayed {
		t.Fatalf("second replay: %+v", res)
	}
	polltest.Wait(t, "the replayed event's call", processTimeout, func() bool { _, ok := tg.counts(ev.id); return ok == 1 })
	var replays []string
	for _, rec := range e.broker.Records(t, testTopic) {
		if of, ok := rec.Header(deadletter.HeaderReplayOf); ok {
			replays = append(replays, of)
		}
	}
	if len(replays) != 1 || replays[0] != l.ID {
		t.Fatalf("replays in %s: %v, want one of %s", testTopic, replays, l.ID)
	}
	// Even a replay produced twice (a leader that failed between the
	// event and its marker) runs once: the engine's dedupe knows it.
	for _, rec := range e.broker.Records(t, testTopic) {
		if _, ok := rec.Header(deadletter.HeaderReplayOf); ok {
			again := kafkasource.Record{Key: []byte(rec.Key), Value: rec.Value}
			for _, h := range rec.Headers {
				again.Headers = append(again.Headers, kafkasource.Header{Key: h.Key, Value: []byte(h.Value)})
			}
			if err := e.writer.Write(t.Context(), again); err != nil {
				t.Fatal(err)
			}
		}
	}
	polltest.Wait(t, "the duplicate replay skipped", processTimeout, func() bool {
		return r.counter("squall_engine_events_deduplicated_total") == 1
	})
	if failed, accepted := tg.counts(ev.id); accepted != 1 {
		t.Errorf("the target accepted the event %d times (failed %d), want once", accepted, failed)
	}
	if n := dlq(); n != 1 {
		t.Errorf("%v dead letters after the replay, want 1", n)
	}

	// 3. An event that keeps failing is replayed at most MaxReplays
	// times, then stays dead.
	tg.fail(true)
	ev2 := alert()
	e.produce(ev2)
	polltest.Wait(t, "the second dead letter", processTimeout, func() bool { return dlq() == 2 })
	// The dead letters of one key share a partition: the newest of the
	// event is its last in the list.
	newest := func() *deadletters.Letter {
		var n *deadletters.Letter
		for _, d := range list("").DeadLetters {
			if d.EventID == ev2.id {
				n = d
			}
		}
		return n
	}
	for i := 1; i <= dlCfg.MaxReplays; i++ {
		d := newest()
		if d.ReplayCount != i-1 || d.Replayed != nil {
			t.Fatalf("replay %d: the newest dead letter of the event: %+v", i, d)
		}
		if res := replay(d.ID); res[0].Status != deadletters.StatusReplayed || res[0].ReplayCount != i {
			t.Fatalf("replay %d: %+v", i, res)
		}
		want := float64(2 + i)
		polltest.Wait(t, "the replay dead-lettered again", processTimeout, func() bool { return dlq() == want })
	}
	last := newest()
	if last.ReplayCount != dlCfg.MaxReplays {
		t.Fatalf("newest dead letter of the event: %+v", last)
	}
	res := replay(last.ID)
	if res[0].Status != deadletters.StatusRefused || !strings.Contains(res[0].Reason, "stays dead") {
		t.Errorf("replay past the limit: %+v", res)
	}
}
