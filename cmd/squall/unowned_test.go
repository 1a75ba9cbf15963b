package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/master/fleet"
)

// TestEnginePartitionsUnowned (issue 33 §3): with engine processes
// against the Kafka test broker, the master's fleet list and its metric
// squall_fleet_partitions_unowned say which partitions of the events
// topic no live engine owns. Two engines share the 4 partitions: none.
// One is SIGKILLed: its partitions, until the group hands them to the
// other. Both are SIGKILLed: all 4, and they stay so after the engines
// are dropped from the list. An engine starts again: none.
func TestEnginePartitionsUnowned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master and engine processes")
	}
	t.Parallel()
	const group = "unowned-test"
	w := newEngineWorld(t, 4, "--fleet-stale-after", "1s", "--fleet-drop-after", "2s")
	token := readTrimmed(t, w.tokenFile)
	start := func(name string) *proctest.Proc {
		return w.startEngine(t, group, "--name", name, "--fleet-interval", "200ms")
	}
	// view reads the group in the master's list and in its metrics.
	unownedMetric := regexp.MustCompile(`(?m)^squall_fleet_partitions_unowned\{group="` + group + `",topic="squall.events"\} (\d+)$`)
	type view struct {
		group  fleet.Group
		parts  map[string][]int // live engine id: partitions
		listed int              // engines listed, stale or not
		metric int
	}
	read := func() view {
		v := view{parts: map[string][]int{}, metric: -1}
		code, body := apitest.Call(t.Context(), http.MethodGet, w.base+fleet.Pattern, token, nil, "")
		var list struct {
			Members []fleet.Member `json:"members"`
			Groups  []fleet.Group  `json:"groups"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
			t.Fatalf("fleet list: %d %s", code, body)
		}
		for _, g := range list.Groups {
			if g.Group == group {
				v.group = g
			}
		}
		for _, m := range list.Members {
			if m.Role != fleet.RoleEngine {
				continue
			}
			v.listed++
			if !m.Stale {
				v.parts[m.ID] = m.Partitions
			}
		}
		if _, body := apitest.Call(t.Context(), http.MethodGet, w.base+"/metrics", "", nil, ""); body != nil {
			if m := unownedMetric.FindSubmatch(body); m != nil {
				v.metric, _ = strconv.Atoi(string(m[1]))
			}
		}
		return v
	}
	// waitFor polls the master (separate processes give no signal),
	// bounded.
	waitFor := func(what string, cond func(view) bool) view {
		t.Helper()
		var last view
		if !polltest.Until(t.Context(), 60*time.Second, func() bool { last = read(); return cond(last) }) {
			t.Fatalf("%s: not within 60s; last: group %+v, live engines %v of %d listed, metric %d", what, last.group, last.parts, last.listed, last.metric)
		}
		return last
	}
	unowned := func(want ...int) func(view) bool {
		return func(v view) bool {
			return v.group.Partitions == 4 && slices.Equal(v.group.Unowned, want) && v.metric == len(want)
		}
	}

	a, b := start("engine-a"), start("engine-b")
	v := waitFor("two engines sharing the partitions", func(v view) bool {
		return unowned()(v) && v.group.Engines == 2 && len(v.parts["engine-a"]) == 2 && len(v.parts["engine-b"]) == 2
	})
	lost := v.parts["engine-a"]

	killed := time.Now()
	a.Kill()
	waitFor(fmt.Sprintf("engine a's partitions %v without an owner", lost), unowned(lost...))
	t.Logf("engine a SIGKILLed: its partitions %v shown without an owner after %s", lost, time.Since(killed).Round(10*time.Millisecond))
	waitFor("engine b owning every partition", func(v view) bool { return unowned()(v) && len(v.parts["engine-b"]) == 4 })
	t.Logf("engine b owns every partition, none shown without an owner, %s after the kill", time.Since(killed).Round(10*time.Millisecond))

	killed = time.Now()
	b.Kill()
	waitFor("every partition without an owner", unowned(0, 1, 2, 3))
	t.Logf("both engines SIGKILLed: 4 partitions shown without an owner after %s", time.Since(killed).Round(10*time.Millisecond))
	// Dropped from the list (2s), the engines leave their group behind.
	waitFor("the group kept once its engines are dropped", func(v view) bool {
		return unowned(0, 1, 2, 3)(v) && v.listed == 0 && v.group.Engines == 0
	})

	restarted := time.Now()
	start("engine-c")
	waitFor("engine c owning every partition", func(v view) bool { return unowned()(v) && len(v.parts["engine-c"]) == 4 })
	t.Logf("engine c started: no partition without an owner after %s", time.Since(restarted).Round(10*time.Millisecond))
}
