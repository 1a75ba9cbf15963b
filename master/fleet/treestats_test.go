package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink records the tree stats it takes.
type sink struct {
	mu  sync.Mutex
	got []*TreeStats
}

func (s *sink) AddTreeStats(_ string, st *TreeStats, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, st)
}

var _ StatsSink = (*sink)(nil)

// TestFleet_treeStats: an engine's tree stats go to the sink, not to the
// list, which shows the engine's events per second from two heartbeats of
// the same instance and tree; bad stats are refused.
func TestFleet_treeStats(t *testing.T) {
	t.Parallel()
	s := &sink{}
	cfg := Default()
	cfg.Stats = s
	f, srv := newTestFleet(t, cfg)
	stats := func(instance string, index, events uint64) string {
		return fmt.Sprintf(`{"id": "e1", "role": "engine", "ready": true, "reasons": [], "tree_stats": {"tree_index": %d, "instance": %q,
			"loaded_ms": 1800000000000, "events": %d, "nodes": [{"path": ["root"], "reached": %d, "matched": %d},
			{"path": ["root", "rs"], "reached": %d, "matched": 1, "rules": [{"name": "r", "reached": %d, "matched": 1, "actions": 1,
			"succeeded": 1, "failed": 0, "last_match_ms": 1800000000001}]}]}}`, index, instance, events, events, events, events, events)
	}
	t0 := time.Unix(1_800_000_100, 0)
	rate := func() *float64 {
		t.Helper()
		ms, err := f.List(t.Context(), t0, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == "e1" {
				if b, _ := json.Marshal(m); strings.Contains(string(b), "tree_stats") {
					t.Errorf("the list holds the tree stats: %s", b)
				}
				return m.EventsPerSecond
			}
		}
		t.Fatal("e1 not listed")
		return nil
	}
	put := func(body string, at time.Time) {
		t.Helper()
		var rep Report
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatal(err)
		}
		if err := rep.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := f.Report(rep, "u", at); err != nil {
			t.Fatal(err)
		}
	}
	put(stats("a", 7, 100), t0)
	if r := rate(); r != nil {
		t.Errorf("a rate after one heartbeat: %v", *r)
	}
	put(stats("a", 7, 300), t0.Add(10*time.Second))
	if r := rate(); r == nil || *r != 20 {
		t.Errorf("rate %v, want 20/s", r)
	}
	// Another instance (a restart) or tree: unknown until the next one.
	put(stats("b", 7, 5), t0.Add(20*time.Second))
	if r := rate(); r != nil {
		t.Errorf("a rate across instances: %v", *r)
	}
	if len(s.got) != 3 || s.got[2].Instance != "b" || s.got[1].Nodes[1].Rules[0].Reached != 300 {
		t.Errorf("sink got %+v", s.got)
	}

	reporter := token("fleet_report")
	for _, tc := range []struct{ name, body, want string }{
		{"no instance", strings.Replace(stats("a", 7, 1), `"instance": "a"`, `"instance": ""`, 1), "instance"},
		{"no tree index", stats("a", 0, 1), "tree_index"},
		{"a bad path", strings.Replace(stats("a", 7, 1), `["root", "rs"]`, `["root", "../x"]`, 1), "not a node name"},
		{"a bad rule name", strings.Replace(stats("a", 7, 1), `"name": "r"`, `"name": "r/s"`, 1), "not a rule name"},
		{"a satellite", strings.Replace(stats("a", 7, 1), `"role": "engine"`, `"role": "satellite"`, 1), "only engines"},
	} {
		path := "/engine/e1"
		if tc.name == "a satellite" {
			path = "/satellite/e1"
		}
		code, body := call(t, "PUT", srv.URL+Pattern+path, reporter, "application/json", tc.body)
		if code != 400 || !strings.Contains(body, tc.want) || !strings.Contains(body, "tree_stats") {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
	var nodes []string
	for i := range MaxStatsEntries + 1 {
		nodes = append(nodes, fmt.Sprintf(`{"path": ["root", "n%d"], "reached": 1, "matched": 0}`, i))
	}
	big := `{"id": "e1", "role": "engine", "ready": true, "tree_stats": {"tree_index": 7, "instance": "a", "loaded_ms": 1, "events": 1, "nodes": [` +
		strings.Join(nodes, ",") + `]}}`
	if code, body := call(t, "PUT", srv.URL+Pattern+"/engine/e1", reporter, "application/json", big); code != 400 || !strings.Contains(body, "more than") {
		t.Errorf("too many entries: %d %s", code, body)
	}
	if len(s.got) != 3 {
		t.Errorf("refused stats reached the sink: %d", len(s.got))
	}
}
