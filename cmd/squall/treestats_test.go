package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/treestats"
)

// statsTree counts a known mix: orders (big ones stop their ruleset),
// alerts under a filter (warnings call an action no executor handles,
// which fails), and a ruleset nothing matches.
const statsTree = `{"version": "1.1", "Filter": {"name": "root",
  "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [
    {"Ruleset": {"name": "orders", "rules": [
      {"name": "big", "description": "", "continue": false, "active": true,
       "constraint": {"WHERE": {"type": "AND", "operators": [
         {"type": "equals", "first": "${event.type}", "second": "order"},
         {"type": "ge", "first": "${event.payload.amount}", "second": 100}]}, "WITH": {}},
       "actions": [{"id": "archive", "payload": {"event": "${event}", "archive_type": "one"}}]},
      {"name": "order", "description": "", "continue": true, "active": true,
       "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "order"}, "WITH": {}},
       "actions": [{"id": "archive", "payload": {"event": "${event}", "archive_type": "one"}}]}]}},
    {"Filter": {"name": "alerts", "filter": {"description": "", "active": true,
       "filter": {"type": "equals", "first": "${event.type}", "second": "alert"}},
     "nodes": [{"Ruleset": {"name": "severity", "rules": [
      {"name": "critical", "description": "", "continue": true, "active": true,
       "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.severity}", "second": "critical"}, "WITH": {}},
       "actions": [{"id": "archive", "payload": {"event": "${event}", "archive_type": "one"}}]},
      {"name": "warning", "description": "", "continue": true, "active": true,
       "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.severity}", "second": "warning"}, "WITH": {}},
       "actions": [{"id": "nosuch", "payload": {}}]}]}}]}},
    {"Ruleset": {"name": "never", "rules": [
      {"name": "dead", "description": "", "continue": true, "active": true,
       "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "nothing"}, "WITH": {}},
       "actions": [{"id": "archive", "payload": {"event": "${event}", "archive_type": "one"}}]}]}}]}}`

// statsMix is a mix of events of statsTree.
type statsMix struct{ orders, big, critical, warnings, others int }

func (m statsMix) plus(o statsMix) statsMix {
	return statsMix{m.orders + o.orders, m.big + o.big, m.critical + o.critical, m.warnings + o.warnings, m.others + o.others}
}

func (m statsMix) events() int { return m.orders + m.critical + m.warnings + m.others }

// want returns what the stats must say of the mix, by node path and
// rule: reached, matched, and for rules actions, succeeded, failed.
func (m statsMix) want() map[string][5]uint64 {
	u := func(n int) uint64 { return uint64(n) }
	ev, alerts := u(m.events()), u(m.critical+m.warnings)
	return map[string][5]uint64{
		"root":                          {ev, ev},
		"root/orders":                   {ev, u(m.orders)},
		"root/orders/big":               {ev, u(m.big), u(m.big), u(m.big), 0},
		"root/orders/order":             {ev - u(m.big), u(m.orders - m.big), u(m.orders - m.big), u(m.orders - m.big), 0},
		"root/alerts":                   {ev, alerts},
		"root/alerts/severity":          {alerts, alerts},
		"root/alerts/severity/critical": {alerts, u(m.critical), u(m.critical), u(m.critical), 0},
		"root/alerts/severity/warning":  {alerts, u(m.warnings), u(m.warnings), 0, u(m.warnings)},
		"root/never":                    {ev, 0},
		"root/never/dead":               {ev, 0, 0, 0, 0},
	}
}

// flatten returns the stats by node path and rule.
func flattenStats(a *treestats.Answer) map[string][5]uint64 {
	out := map[string][5]uint64{}
	for _, n := range a.Nodes {
		key := strings.Join(n.Path, "/")
		out[key] = [5]uint64{n.Reached, n.Matched}
		for _, r := range n.Rules {
			out[key+"/"+r.Name] = [5]uint64{r.Reached, r.Matched, r.Actions, r.Succeeded, r.Failed}
		}
	}
	return out
}

// TestTreeStats_twoEngines runs a master and two engines (real processes,
// heartbeats every 100ms) on a Kafka test broker: the stats the master
// sums equal what the test computes of the events it wrote; an engine
// killed and started again counts nothing twice; a deploy starts from
// zero; a token scoped to a subtree sees that subtree only.
func TestTreeStats_twoEngines(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	apitest.DeployTree(t, base, token, []byte(statsTree))
	broker := kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: 4})
	actions, _ := archiveActions(t, dir, `"retry": {"max_attempts": 1}, `)
	const group = "stats-test"
	start := func(name string) *proctest.Proc {
		return startEngine(t, []string{"SQUALL_GROUP=" + group}, "--master", base, "--token-file", tokenFile, "--kafka-brokers", broker.Addr,
			"--actions-config", actions, "--name", name, "--fleet-interval", "100ms",
			"--kafka-session-timeout", "2s", "--kafka-heartbeat-interval", "200ms")
	}
	p1, p2 := start("e1"), start("e2")
	// waitGroup waits until the two engines share the partitions: an
	// event fetched during a rebalance may be evaluated again by the
	// engine that gets its partition (at least once), and counted again.
	waitGroup := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			owned := map[int]int{}
			both := true
			for _, p := range []*proctest.Proc{p1, p2} {
				var st struct {
					Joined     bool  `json:"joined"`
					Partitions []int `json:"partitions"`
				}
				_, body := apitest.Call(t.Context(), http.MethodGet, p.Base+"/readyz", "", nil, "")
				if json.Unmarshal(body, &st) != nil || !st.Joined || len(st.Partitions) == 0 {
					both = false
				}
				for _, n := range st.Partitions {
					owned[n]++
				}
			}
			if both && len(owned) == 4 && owned[0] == 1 && owned[1] == 1 && owned[2] == 1 && owned[3] == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the engines do not share the 4 partitions: %v\ne1:\n%s\ne2:\n%s", owned, p1.Logs.String(), p2.Logs.String())
			}
			pause(t)
		}
	}
	waitGroup()

	seq := 0
	produceMix := func(m statsMix) {
		t.Helper()
		var recs []*kgo.Record
		add := func(n int, typ, payload string) {
			for range n {
				seq++
				recs = append(recs, &kgo.Record{
					Key:     fmt.Appendf(nil, "k%d", seq%16),
					Value:   fmt.Appendf(nil, `{"type": %q, "created_ms": 1700000000000, "payload": %s}`, typ, payload),
					Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: fmt.Appendf(nil, "019a0000-0000-7000-8000-%012d", seq)}},
				})
			}
		}
		add(m.big, "order", `{"amount": 500}`)
		add(m.orders-m.big, "order", `{"amount": 5}`)
		add(m.critical, "alert", `{"severity": "critical"}`)
		add(m.warnings, "alert", `{"severity": "warning"}`)
		add(m.others, "misc", `{}`)
		produce(t, broker.Addr, recs...)
	}
	get := func(tok, query string) (int, *treestats.Answer, []byte) {
		t.Helper()
		code, body := apitest.Call(t.Context(), http.MethodGet, base+treestats.Pattern+query, tok, nil, "")
		var a treestats.Answer
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatalf("stats: %v: %s", err, body)
			}
		}
		return code, &a, body
	}
	// waitStats waits until the stats of the active tree say what mix
	// wants (a separate process gives no signal to wait on: poll,
	// bounded).
	waitStats := func(what string, m statsMix) *treestats.Answer {
		t.Helper()
		want := m.want()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, a, body := get(token, "")
			if code == http.StatusOK && a.Events != nil && *a.Events == uint64(m.events()) && maps.Equal(flattenStats(a), want) {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the stats do not reach %v: %d %s\ne1:\n%s\ne2:\n%s", what, want, code, body, p1.Logs.String(), p2.Logs.String())
			}
			pause(t)
		}
	}

	first := statsMix{orders: 40, big: 15, critical: 12, warnings: 7, others: 25}
	produceMix(first)
	a := waitStats("both engines", first)
	if a.Window.Name != treestats.WindowDeploy || a.Window.FromMS == 0 || len(a.Engines) == 0 {
		t.Fatalf("stats: %+v", a)
	}
	for _, n := range a.Nodes {
		for _, r := range n.Rules {
			if (r.Matched > 0) != (r.LastMatchMS > 0) {
				t.Errorf("rule %v/%s matched %d, last match %d", n.Path, r.Name, r.Matched, r.LastMatchMS)
			}
		}
	}
	// The windows: the master has heartbeats of less than a minute, and
	// the tree is younger than the 1h window, which is all of it.
	if code, w, body := get(token, "?window=1h"); code != http.StatusOK || !maps.Equal(flattenStats(w), first.want()) || !w.Window.Complete {
		t.Fatalf("1h window: %d %s", code, body)
	}
	if code, _, body := get(token, "?window=1w"); code != http.StatusBadRequest || !strings.Contains(string(body), "1m, 1h, 24h or deploy") {
		t.Fatalf("bad window: %d %s", code, body)
	}

	// A token of the alerts subtree sees it alone, without the fleet's
	// events.
	scoped := unsignedToken(t, "ops", "alerts=root,alerts:view")
	code, s, body := get(scoped, "")
	if code != http.StatusOK || s.Events != nil || len(s.Engines) != 0 || len(s.Nodes) != 2 ||
		strings.Join(s.Nodes[0].Path, "/") != "root/alerts" || s.Nodes[1].Rules[1].Failed != uint64(first.warnings) {
		t.Fatalf("scoped stats: %d %s", code, body)
	}
	writer := unsignedToken(t, "ops", "f=root:fleet_report")
	if code, _, body := get(writer, ""); code != http.StatusForbidden {
		t.Fatalf("a token without view: %d %s", code, body)
	}

	// e1 killed once its offsets are committed (so that it repeats no
	// event), started again: the new instance counts from zero, the
	// master keeps the old one's last counts, nothing counts twice.
	deadline := time.Now().Add(30 * time.Second)
	for !maps.Equal(broker.Committed(t, group, "squall.events"), broker.EndOffsets(t, "squall.events")) {
		if time.Now().After(deadline) {
			t.Fatalf("offsets not committed: %v, end %v", broker.Committed(t, group, "squall.events"), broker.EndOffsets(t, "squall.events"))
		}
		pause(t)
	}
	p1.Kill()
	p1 = start("e1")
	waitGroup()
	second := statsMix{orders: 10, big: 3, critical: 4, warnings: 2, others: 6}
	produceMix(second)
	a = waitStats("after a restart", first.plus(second))
	instances := map[string]bool{}
	for _, e := range a.Engines {
		if e.ID == "e1" {
			instances[e.Instance] = true
		}
	}
	if len(instances) != 2 {
		t.Errorf("e1's instances: %+v", a.Engines)
	}

	// A deploy starts from zero.
	index := a.TreeIndex
	apitest.DeployTree(t, base, token, []byte(statsTree))
	_, a, _ = get(token, "")
	if a.TreeIndex <= index {
		t.Fatalf("tree index %d after the deploy, was %d", a.TreeIndex, index)
	}
	// The events must meet the new tree: wait until both engines run it.
	for _, p := range []*proctest.Proc{p1, p2} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var st struct {
				TreeIndex uint64 `json:"tree_index"`
			}
			_, body := apitest.Call(t.Context(), http.MethodGet, p.Base+"/readyz", "", nil, "")
			if json.Unmarshal(body, &st) == nil && st.TreeIndex == a.TreeIndex {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an engine does not run tree %d: %s", a.TreeIndex, body)
			}
			pause(t)
		}
	}
	third := statsMix{orders: 6, big: 1, critical: 2, warnings: 1, others: 3}
	produceMix(third)
	waitStats("after a deploy", third)
}
