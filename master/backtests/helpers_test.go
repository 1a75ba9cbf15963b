package backtests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

const testTopic = "squall.events"

// ruleTree is a tree of one ruleset, "all", whose rules match the events
// of the types they name: rule r matches type types[r].
func ruleTree(t testing.TB, types map[string]string) *config.Node {
	t.Helper()
	var rules []string
	for _, name := range []string{"r1", "r2", "r3"} {
		rules = append(rules, fmt.Sprintf(`{"name": %q, "description": "", "continue": true, "active": true,
			"constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": %q}, "WITH": {}}, "actions": []}`, name, types[name]))
	}
	ex, err := config.DecodeExport(fmt.Appendf(nil, `{"version": "1.1", "Filter": {"name": "root",
		"filter": {"description": "", "active": true, "filter": {}},
		"nodes": [{"Ruleset": {"name": "all", "rules": [%s]}}]}}`, strings.Join(rules, ",")))
	if err != nil {
		t.Fatal(err)
	}
	return ex.Node
}

// activeTypes and draftTypes: the draft changes r2 and r3.
var (
	activeTypes = map[string]string{"r1": "a", "r2": "b", "r3": "c"}
	draftTypes  = map[string]string{"r1": "a", "r2": "c", "r3": "d"}
)

// eventType is the type of the i-th event sent: of ten, 4 a, 2 b, 3 c
// and 1 d (counts that differ under the two trees).
func eventType(i int) string { return string("aaaabbcccd"[i%10]) }

// wantCounts are the counts of each rule under each tree over the events
// 0..n-1, computed from their types.
func wantCounts(n int) map[string][2]int64 {
	out := map[string][2]int64{}
	for i := range n {
		typ := eventType(i)
		for _, r := range []string{"r1", "r2", "r3"} {
			v := out["root/all/"+r]
			if activeTypes[r] == typ {
				v[0]++
			}
			if draftTypes[r] == typ {
				v[1]++
			}
			out["root/all/"+r] = v
		}
	}
	return out
}

// produce sends the events 0..n-1 to the broker.
func produce(t testing.TB, addr string, n int) {
	t.Helper()
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{addr}, Timeout: 5 * time.Second}, Topic: testTopic})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var recs []kafkasource.Record
	for i := range n {
		recs = append(recs, kafkasource.Record{Value: fmt.Appendf(nil, `{"type": %q, "created_ms": 1, "payload": {"i": %d}}`, eventType(i), i),
			ToPartition: true, Partition: i % 3})
	}
	if err := w.Write(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
}

// trees is a Trees of an active tree, one draft and versions.
type trees struct {
	mu       sync.Mutex
	active   *config.Node
	draft    *store.Draft
	versions map[uint64]*config.Node
}

func (tr *trees) Active() (*config.Node, uint64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.active.Clone(), 7
}

func (tr *trees) Draft() (*store.Draft, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.draft == nil {
		return nil, store.ErrNoDraft
	}
	return tr.draft.Clone(), nil
}

func (tr *trees) Versions() []store.Version {
	return []store.Version{{Number: 3, Index: 7}}
}

func (tr *trees) VersionTree(n uint64) (store.Version, *config.Node, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t, ok := tr.versions[n]
	if !ok {
		return store.Version{}, nil, fmt.Errorf("version %d: %w", n, store.ErrNoVersion)
	}
	return store.Version{Number: n}, t.Clone(), nil
}

// token returns an unsigned token of user with roles on the root.
func token(user string, roles ...string) string {
	return auth.EncodeUnsigned(auth.Claims{User: user, Auths: map[string]auth.Authorization{"main": {Path: []string{"root"}, Roles: roles}}})
}

// fixture is an API on a test server, its trees and a clock.
type fixture struct {
	api   *API
	srv   *httptest.Server
	trees *trees
	mu    sync.Mutex
	now   time.Time
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func newFixture(t *testing.T, cfg Config, clock bool) *fixture {
	t.Helper()
	f := &fixture{trees: &trees{active: ruleTree(t, activeTypes), versions: map[uint64]*config.Node{2: ruleTree(t, draftTypes)},
		draft: &store.Draft{ID: "d1", Owner: "alice", Tree: ruleTree(t, draftTypes)}}, now: time.Now()}
	if clock {
		cfg.Now = f.clock
	}
	a, err := New(cfg, f.trees, &auth.Verifier{AllowUnsigned: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.api = a
	f.srv = httptest.NewServer(a.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// do sends a request with tok and returns the status and the body.
func (f *fixture) do(t *testing.T, method, path, tok string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// worker starts a worker of engine id reading the broker; it stops with
// the test, or when the returned function is called.
func (f *fixture) worker(t *testing.T, b *kafkatest.Broker, id string, rate float64, opts ...func(*WorkerConfig)) (stop func()) {
	t.Helper()
	r, err := kafkasource.NewReader(kafkasource.Dial{Brokers: []string{b.Addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := WorkerConfig{MasterURLs: []string{f.srv.URL}, Token: token("engine", "view", "fleet_report"), Engine: id,
		Topic: testTopic, Reader: r, Rate: rate, ProgressInterval: 50 * time.Millisecond, ClaimWait: time.Second, Client: calltest.Client()}
	for _, o := range opts {
		o(&cfg)
	}
	w, err := NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func (f *fixture) client(t *testing.T, tok string) *Client {
	t.Helper()
	c, err := NewClient([]string{f.srv.URL}, tok, f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start asks, with tok, for a backtest of the draft d1 over the last 10
// records of each partition, and returns it.
func (f *fixture) start(t *testing.T, tok string) Backtest {
	t.Helper()
	status, body := f.do(t, http.MethodPost, Prefix, tok, Request{Draft: "d1", Last: 10})
	var bt Backtest
	if status != http.StatusCreated || json.Unmarshal(body, &bt) != nil {
		t.Fatalf("start: %d %s", status, body)
	}
	return bt
}
