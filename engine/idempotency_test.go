package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/polltest"
)

// keyTree posts "order" events to the key receiver (URL replaced) twice,
// and produces them to testOut.
const keyTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "all", "rules": [
    {"name": "orders", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "order"}, "WITH": {}},
     "actions": [
       {"id": "http", "payload": {"url": "URL", "id": "${event.payload.id}"}},
       {"id": "kafka", "payload": {"topic": "` + testOut + `", "value": {"id": "${event.payload.id}"}}},
       {"id": "http", "payload": {"url": "URL", "id": "${event.payload.id}"}}]}
  ]}}]}}`

// TestService_IdempotencyKeys processes every event twice (the second
// record of an event id is a redelivery; deduplication is off): the http
// requests and the Kafka records of both deliveries carry the same keys,
// derived from the event id and the action's position, and the keys of an
// event's actions differ.
func TestService_IdempotencyKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	var mu sync.Mutex
	keys := map[string][]string{} // event id -> Idempotency-Key, in arrival order
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		keys[body.ID] = append(keys[body.ID], r.Header.Get(action.HeaderIdempotencyKey))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	e.actions = filepath.Join(t.TempDir(), "actions.json")
	writeFile(t, e.actions, fmt.Sprintf(`{"kafka": {"allowed_topics": [%q]}, "http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]}}`, testOut))
	e.deployExport(strings.ReplaceAll(keyTree, "URL", srv.URL))
	cfg := e.config()
	cfg.DedupeSize = 0
	startReady(t, cfg)

	evs := orders(5, 1) // one tenant: one partition, in order
	e.produce(append(slices.Clone(evs), evs...)...)
	polltest.Wait(t, "20 http actions and 10 kafka records", processTimeout, func() bool {
		mu.Lock()
		n := 0
		for _, ks := range keys {
			n += len(ks)
		}
		mu.Unlock()
		return n >= 20 && len(e.broker.Records(t, testOut)) >= 10
	})
	key := func(eventID, position string) string {
		return tree.Action{EventID: eventID, Position: position}.IdempotencyKey()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range evs {
		first, second := `"`+key(ev.id, "root/all/orders/0")+`"`, `"`+key(ev.id, "root/all/orders/2")+`"`
		if want := []string{first, second, first, second}; !slices.Equal(keys[ev.id], want) {
			t.Errorf("event %s: keys %q, want %q", ev.id, keys[ev.id], want)
		}
	}
	records := map[string]int{}
	for _, rec := range e.broker.Records(t, testOut) {
		id, _ := rec.Header(action.HeaderEventID)
		pos, _ := rec.Header(action.HeaderActionPosition)
		k, _ := rec.Header(action.HeaderIdempotency)
		if pos != "root/all/orders/1" || k != key(id, pos) {
			t.Errorf("record of %s: position %q key %q, want root/all/orders/1 %q", id, pos, k, key(id, "root/all/orders/1"))
		}
		records[id]++
	}
	for _, ev := range evs {
		if records[ev.id] != 2 {
			t.Errorf("event %s: %d records, want 2", ev.id, records[ev.id])
		}
	}
}

// TestService_CommitsAfterCompletion commits each event shortly after it
// finished: here neither the interval (an hour) nor the batch (a million
// events) would.
func TestService_CommitsAfterCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.deploy("v1")
	cfg := e.config()
	cfg.CommitInterval = time.Hour
	cfg.CommitBatch = 1_000_000
	r := startReady(t, cfg)
	for round := range 3 {
		evs := orders(10, 3)
		e.produce(evs...)
		e.waitArchived(evs)
		e.waitCommitted()
		if n := r.counter("squall_engine_commits_total"); n < float64(round+1) {
			t.Fatalf("%v commits after round %d", n, round+1)
		}
	}
}

// TestService_CrashArchivesOnce kills an engine that committed nothing
// while it drains a backlog and starts another on the same archive
// directory: it runs every event again, and the archive writes none of
// the lines the first one wrote a second time (their keys are in the
// files' last lines): every event is archived exactly once, while the http
// receiver, which ignores the keys, sees the repeats.
func TestService_CrashArchivesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.deploy("v1")
	cfg := e.config()
	// Engine a never commits: everything it archives is run again (the
	// 2000 events stay under its replay limit, 2 × 4 workers × 256).
	a := startReady(t, commitsWhenAsked(cfg))

	evs := orders(2000, 6)
	e.produce(evs...)
	polltest.Wait(t, "some events archived", processTimeout, func() bool { return len(e.archivedEvents()) >= 300 })
	a.kill()
	before := len(e.archivedEvents())

	b := start(t, cfg)
	e.waitArchived(evs)
	e.waitCommitted()
	lines := e.archivedEvents() // with what b archived before its last commit
	for id, n := range countIDs(lines) {
		if n != 1 {
			t.Errorf("event %s archived %d times", id, n)
		}
	}
	if len(lines) != len(evs) {
		t.Errorf("%d archive lines for %d events", len(lines), len(evs))
	}
	if got := b.counter("squall_action_archive_repeats_total"); got != float64(before) {
		t.Errorf("engine b left out %v repeated lines, want the %d engine a wrote", got, before)
	}
	// An http call of a's may have been cut by the crash.
	if calls := len(e.receiver.Calls()); calls < len(evs)+before-cfg.Workers {
		t.Errorf("%d http calls: want the %d events and the %d events run again", calls, len(evs), before)
	}
	t.Logf("engine a archived %d events before its crash; engine b ran them again and archived none of them twice", before)
}

// commitsWhenAsked returns cfg without an interval, a delay or a batch
// count to commit on: the engine commits only when its fetch loop asks,
// having reached its bound of uncommitted events.
func commitsWhenAsked(cfg Config) Config {
	cfg.CommitInterval, cfg.CommitDelay, cfg.CommitBatch = time.Hour, 0, 1<<30
	return cfg
}

// TestService_ReplayBounded: an engine whose commits come only when its
// fetch loop asks for them (no interval, no delay, no batch count) holds
// at most 2 × workers × queue size events uncommitted, plus one batch:
// killed halfway through a backlog, it leaves at most that many to run
// again, whatever its commit settings.
func TestService_ReplayBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.deploy("v1")
	cfg := e.config()
	first := commitsWhenAsked(cfg)
	first.Workers, first.QueueSize = 2, 16
	bound := 2*first.Workers*first.QueueSize + kafkasource.MaxBatchMessages
	a := startReady(t, first)

	evs := orders(3000, 6)
	e.produce(evs...)
	polltest.Wait(t, "half the events archived", processTimeout, func() bool { return len(e.archivedEvents()) >= 1500 })
	waits := a.counter("squall_engine_commit_waits_total") // a's metrics go with it
	a.kill()
	before := len(e.archivedEvents())

	b := start(t, cfg)
	e.waitArchived(evs)
	e.waitCommitted()
	repeats := b.counter("squall_action_archive_repeats_total")
	t.Logf("engine a archived %d events, waited %v times for a commit; engine b ran %v of them again (bound %d)",
		before, waits, repeats, bound)
	if repeats > float64(bound) {
		t.Errorf("%v events run again, want at most %d", repeats, bound)
	}
	if waits == 0 {
		t.Error("engine a never waited for a commit")
	}
	for id, n := range countIDs(e.archivedEvents()) {
		if n != 1 {
			t.Errorf("event %s archived %d times", id, n)
		}
	}
}
