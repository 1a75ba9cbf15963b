package treestats

import (
	"testing"
	"time"

	"github.com/squallhq/squall/master/fleet"
)

// report is a heartbeat's stats: events, all reaching root and matching
// root/rs's rule r.
func report(index uint64, instance string, loaded time.Time, events uint64) *fleet.TreeStats {
	return &fleet.TreeStats{TreeIndex: index, Instance: instance, LoadedMS: loaded.UnixMilli(), Events: events, Nodes: []fleet.NodeStats{
		{Path: []string{"root"}, Reached: events, Matched: events},
		{Path: []string{"root", "rs"}, Reached: events, Matched: events, Rules: []fleet.RuleStats{
			{Name: "r", Reached: events, Matched: events, Actions: events, Succeeded: events, LastMatchMS: loaded.UnixMilli() + int64(events)}}},
	}}
}

func matchedOf(v *view) uint64 { return v.cur.by[ruleKey([]string{"root", "rs"}, "r")][cMatched] }

func TestAggregator_sumsInstances(t *testing.T) {
	a := New(Config{})
	t0 := time.Unix(1_800_000_000, 0)
	a.AddTreeStats("e1", report(7, "i1", t0, 10), t0.Add(time.Second))
	a.AddTreeStats("e2", report(7, "i2", t0, 5), t0.Add(time.Second))
	// A heartbeat repeated, or lost then followed by the next: the last
	// cumulative counts replace the previous ones.
	a.AddTreeStats("e1", report(7, "i1", t0, 10), t0.Add(2*time.Second))
	a.AddTreeStats("e1", report(7, "i1", t0, 30), t0.Add(3*time.Second))
	// e2 restarted: a new instance from zero; the old one's counts stay.
	a.AddTreeStats("e2", report(7, "i3", t0.Add(4*time.Second), 2), t0.Add(5*time.Second))
	v := a.view(7, WindowDeploy, t0.Add(6*time.Second))
	if v.cur.events != 37 || matchedOf(v) != 37 || len(v.engines) != 3 {
		t.Fatalf("events %d, matched %d, engines %+v", v.cur.events, matchedOf(v), v.engines)
	}
	if last := v.last[ruleKey([]string{"root", "rs"}, "r")]; last != t0.UnixMilli()+4002 { // i3 loaded at t0+4s, 2 events
		t.Errorf("last match %d", last)
	}
	// Another tree is counted apart; an unknown one is empty.
	a.AddTreeStats("e1", report(9, "i1", t0, 4), t0.Add(7*time.Second))
	if v := a.view(9, WindowDeploy, t0.Add(8*time.Second)); v.cur.events != 4 {
		t.Errorf("tree 9: %d events", v.cur.events)
	}
	if v := a.view(8, WindowDeploy, t0); v.cur.events != 0 || v.window.FromMS != 0 {
		t.Errorf("tree 8: %+v", v)
	}

	// Silent instances are retired into one sum that keeps their counts.
	later := t0.Add(6*time.Second + Default().RetireAfter)
	a.AddTreeStats("e1", report(7, "i1", t0, 31), later)
	v = a.view(7, WindowDeploy, later)
	if v.cur.events != 38 || len(v.engines) != 2 || !v.engines[1].Retired || v.engines[1].Events != 7 {
		t.Fatalf("after retiring: events %d, engines %+v", v.cur.events, v.engines)
	}
}

func TestAggregator_windows(t *testing.T) {
	a := New(Config{})
	t0 := time.Unix(1_800_000_000, 0)
	// One engine counting 1 event a second, reporting every 10s for 26h.
	var now time.Time
	for s := 10; s <= 26*3600; s += 10 {
		now = t0.Add(time.Duration(s) * time.Second)
		a.AddTreeStats("e1", report(3, "i1", t0, uint64(s)), now)
	}
	if n := len(a.trees[3].snaps); n > 60 {
		t.Errorf("%d snapshots kept", n)
	}
	for _, tc := range []struct {
		window string
		want   uint64 // events, within a snapshot period
		slack  uint64
	}{
		{"1m", 60, 60},
		{"1h", 3600, 60},
		{"24h", 24 * 3600, 3600},
		{WindowDeploy, 26 * 3600, 0},
	} {
		v := a.view(3, tc.window, now)
		got := matchedOf(v)
		if got < tc.want || got > tc.want+tc.slack || !v.window.Complete {
			t.Errorf("%s: %d matches (want %d to %d), window %+v", tc.window, got, tc.want, tc.want+tc.slack, v.window)
		}
		if span := uint64(v.window.ToMS-v.window.FromMS) / 1000; span != got {
			t.Errorf("%s: the window spans %ds for %d events at 1/s", tc.window, span, got)
		}
	}

	// A master that took heartbeats for a shorter time than the window
	// (a new leader) says from when its counts are.
	b := New(Config{})
	start := t0.Add(10 * time.Hour)
	b.AddTreeStats("e1", report(3, "i1", t0, 36000), start)
	b.AddTreeStats("e1", report(3, "i1", t0, 36000+120), start.Add(2*time.Minute))
	v := b.view(3, "1h", start.Add(2*time.Minute))
	if v.window.Complete || v.window.FromMS != start.UnixMilli() || matchedOf(v) != 120 {
		t.Errorf("partial window: %+v, %d", v.window, matchedOf(v))
	}
	// A tree younger than the window: all of it.
	v = b.view(3, "24h", start.Add(2*time.Minute))
	if v.window.Complete != true || matchedOf(v) != 36120 {
		t.Errorf("young tree: %+v, %d", v.window, matchedOf(v))
	}
}

func TestAggregator_keepsMaxTrees(t *testing.T) {
	a := New(Config{MaxTrees: 2})
	now := time.Unix(1_800_000_000, 0)
	for _, idx := range []uint64{5, 9, 7} {
		a.AddTreeStats("e1", report(idx, "i1", now, 1), now)
	}
	if len(a.trees) != 2 || a.trees[5] != nil {
		t.Fatalf("trees kept: %v", a.trees)
	}
}
