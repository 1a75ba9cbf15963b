package action

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/squallhq/squall/engine/tree"
)

// keyed returns an action of an event, at a position.
func keyed(id string, p map[string]any, eventID, position string) tree.Action {
	return tree.Action{ID: id, Payload: p, EventID: eventID, Position: position}
}

// The http action sends the action's key in an Idempotency-Key header, the
// same on every attempt and every delivery of the event.
func TestHTTP_idempotencyKey(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, 503, 200)
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 3
	r, _ := newTestRegistry(t, cfg, Deps{})
	a := keyed(IDHTTP, map[string]any{"url": rc.URL}, "ev-1", "root/rs/notify/0")
	// A retried attempt, then the event delivered again.
	for range 2 {
		if err := r.Run(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	want := `"` + a.IdempotencyKey() + `"`
	reqs := rc.received()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		if got := req.header.Values(HeaderIdempotencyKey); !slices.Equal(got, []string{want}) {
			t.Errorf("request %d: Idempotency-Key %q, want %q", i, got, want)
		}
	}

	t.Run("other position, other key", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t)
		h := newHTTPExecutor(testConfig().HTTP, nil)
		for _, pos := range []string{"root/rs/notify/0", "root/rs/notify/1"} {
			if err := h.Execute(t.Context(), keyed(IDHTTP, map[string]any{"url": rc.URL}, "ev-1", pos)); err != nil {
				t.Fatal(err)
			}
		}
		reqs := rc.received()
		if a, b := reqs[0].header.Get(HeaderIdempotencyKey), reqs[1].header.Get(HeaderIdempotencyKey); a == "" || a == b {
			t.Errorf("keys %q and %q: want two different keys", a, b)
		}
	})
	t.Run("the payload's header wins", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t)
		h := newHTTPExecutor(testConfig().HTTP, nil)
		p := map[string]any{"url": rc.URL, "headers": map[string]any{"idempotency-key": "mine"}}
		if err := h.Execute(t.Context(), keyed(IDHTTP, p, "ev-1", "root/rs/notify/0")); err != nil {
			t.Fatal(err)
		}
		if got := rc.received()[0].header.Values(HeaderIdempotencyKey); !slices.Equal(got, []string{"mine"}) {
			t.Errorf("Idempotency-Key %q, want [mine]", got)
		}
	})
	t.Run("no event id, no key", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t)
		h := newHTTPExecutor(testConfig().HTTP, nil)
		if err := h.Execute(t.Context(), tree.Action{ID: IDHTTP, Payload: map[string]any{"url": rc.URL}}); err != nil {
			t.Fatal(err)
		}
		if got := rc.received()[0].header.Values(HeaderIdempotencyKey); got != nil {
			t.Errorf("Idempotency-Key %q, want none", got)
		}
	})
}

// The actions a foreach produces have keys of their own, derived from the
// foreach's position and event id.
func TestForeach_idempotencyKeys(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	r, _ := newTestRegistry(t, testConfig(), Deps{})
	p := payload(t, `{"target": ["a", "b"], "actions": [
		{"id": "http", "payload": {"url": "`+rc.URL+`", "item": "${item}"}},
		{"id": "bad"},
		{"id": "http", "payload": {"url": "`+rc.URL+`", "again": "${item}"}}]}`)
	for range 2 {
		if err := r.Run(t.Context(), keyed(IDForeach, p, "ev-1", "root/rs/r/0")); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, req := range rc.received() {
		keys = append(keys, req.header.Get(HeaderIdempotencyKey))
	}
	var want []string
	for _, pos := range []string{"root/rs/r/0.0.0", "root/rs/r/0.0.1", "root/rs/r/0.2.0", "root/rs/r/0.2.1"} {
		want = append(want, `"`+keyed("", nil, "ev-1", pos).IdempotencyKey()+`"`)
	}
	want = append(want, want...)
	if !slices.Equal(keys, want) {
		t.Errorf("keys\n got %q\nwant %q", keys, want)
	}
}

// The elasticsearch action names its document with the action's key: the
// second delivery of an event finds it there (409) and succeeds without a
// second document.
func TestElasticsearchExecutor_idempotentID(t *testing.T) {
	t.Parallel()
	es := newFakeElasticsearch(t)
	e := newTestElasticsearchExecutor(t, es.URL, nil)
	p := payload(t, `{"index": "alerts", "data": {"n": 1}}`)
	a := keyed(IDElasticsearch, p, "ev-1", "root/rs/r/0")
	for i := range 2 {
		if err := e.Execute(t.Context(), a); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if docs := es.documents("alerts"); len(docs) != 1 {
		t.Fatalf("%d documents, want 1: %q", len(docs), docs)
	}
	es.mu.Lock()
	stored := es.ids["alerts\x00"+a.IdempotencyKey()]
	es.mu.Unlock()
	if !stored {
		t.Errorf("no document with _id %q", a.IdempotencyKey())
	}
	// Another action of the event, and an action without an event id,
	// are documents of their own.
	if err := e.Execute(t.Context(), keyed(IDElasticsearch, p, "ev-1", "root/rs/r/1")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Execute(t.Context(), tree.Action{ID: IDElasticsearch, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if docs := es.documents("alerts"); len(docs) != 4 {
		t.Fatalf("%d documents, want 4", len(docs))
	}
	// A conflict of a document without an id is an error.
	es.itemFail = func(string, string, int) (int, string, string) {
		return http.StatusConflict, "version_conflict_engine_exception", "conflict"
	}
	if err := e.Execute(t.Context(), tree.Action{ID: IDElasticsearch, Payload: p}); err == nil || Retriable(err) {
		t.Errorf("409 without an id: %v, want a permanent error", err)
	}
}

// The kafka action's message carries the event id, the position and the
// key.
func TestKafka_idempotencyHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got [][]Header
	prod := ProducerFunc(func(_ context.Context, _ string, _, _ []byte, hs []Header) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, hs)
		return nil
	})
	k := &kafkaExecutor{p: prod, def: "out"}
	a := keyed(IDKafka, map[string]any{"value": 1}, "ev-1", "root/rs/r/0")
	for _, act := range []tree.Action{a, a, {ID: IDKafka, Payload: map[string]any{"value": 1}}} {
		if err := k.Execute(t.Context(), act); err != nil {
			t.Fatal(err)
		}
	}
	want := []Header{
		{HeaderEventID, []byte("ev-1")},
		{HeaderActionPosition, []byte("root/rs/r/0")},
		{HeaderIdempotency, []byte(a.IdempotencyKey())},
	}
	eq := func(a, b Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }
	if !slices.EqualFunc(got[0], want, eq) || !slices.EqualFunc(got[1], want, eq) {
		t.Errorf("headers %q, want %q twice", got[:2], want)
	}
	if got[2] != nil {
		t.Errorf("headers without an event id: %q, want none", got[2])
	}
}

// The script action's program finds the event id, the position and the key
// in its environment, over script.env's variables of the same names; a
// script of an action without an event id gets script.env alone.
func TestScript_idempotencyEnvironment(t *testing.T) {
	t.Parallel()
	s, dir, _ := newTestScript(t, func(c *ScriptConfig) {
		c.Env = map[string]string{"ONLY": "this", EnvIdempotencyKey: "configured"}
	})
	writeScript(t, dir, "env.sh", `env > "$1"`+"\n")
	run := func(a tree.Action) []string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "env")
		a.Payload = map[string]any{"script": "env.sh", "args": out}
		if err := s.Execute(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var env []string
		for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(kv, "SQUALL_") || strings.HasPrefix(kv, "ONLY=") {
				env = append(env, kv)
			}
		}
		slices.Sort(env)
		return env
	}
	a := keyed(IDScript, nil, "ev-1", "root/rs/r/0")
	want := []string{"ONLY=this", "SQUALL_ACTION_POSITION=root/rs/r/0", "SQUALL_EVENT_ID=ev-1",
		"SQUALL_IDEMPOTENCY_KEY=" + a.IdempotencyKey()}
	if got := run(a); !slices.Equal(got, want) {
		t.Errorf("environment %q, want %q", got, want)
	}
	if got := run(tree.Action{ID: IDScript}); !slices.Equal(got, []string{"ONLY=this", "SQUALL_IDEMPOTENCY_KEY=configured"}) {
		t.Errorf("environment without an event id %q, want script.env", got)
	}
}

// The logger action logs the event id, the position and the key.
func TestLogger_idempotencyKey(t *testing.T) {
	t.Parallel()
	log, out := newTestLogger()
	l := &loggerExecutor{log: log}
	a := keyed(IDLogger, map[string]any{"n": 1}, "ev-1", "root/rs/r/0")
	for _, act := range []tree.Action{a, {ID: IDLogger, Payload: map[string]any{"n": 2}}} {
		if err := l.Execute(t.Context(), act); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["idempotency_key"] != a.IdempotencyKey() || rec["event_id"] != "ev-1" || rec["position"] != "root/rs/r/0" {
		t.Errorf("log line %s: want the event id, the position and the key", lines[0])
	}
	if strings.Contains(lines[1], "idempotency_key") {
		t.Errorf("log line without an event id %s: want no key", lines[1])
	}
}
