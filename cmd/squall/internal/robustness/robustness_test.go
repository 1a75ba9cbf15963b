package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Summary is the outcome of a robustness run, written to summary.json
// and logged.
type Summary struct {
	Nodes    int    `json:"nodes"`
	Clients  int    `json:"clients"`
	Seed     int64  `json:"seed"`
	Duration string `json:"duration"`
	// Ops counts operations by kind and outcome (ok, failed: a definite
	// error answer, unknown: no answer or a 5xx to a write).
	Ops map[string]map[string]int `json:"ops"`
	// Acked is the number of acknowledged inserts; Lost those no node
	// returned at the end; Extra findings present at the end that no
	// insert acknowledged (inserts with an unknown outcome that applied).
	Acked int            `json:"acked_inserts"`
	Lost  map[string]int `json:"lost_by_node"`
	Extra int            `json:"unacknowledged_present"`
	// Linearizable is the porcupine verdict per model: Ok, Illegal or
	// Unknown (the check timed out).
	Linearizable map[string]string `json:"linearizable"`
	// Errors counts client-visible errors by kind: "503 NO_LEADER",
	// "timeout", "refused", …
	Errors      map[string]int `json:"errors"`
	ErrorsTotal int            `json:"errors_total"`
	// Faults counts the nemesis' faults by kind (", leader" when the
	// leader was hit); Failover* are the failover times of leader faults.
	Faults         map[string]int `json:"faults"`
	FailoverMedian string         `json:"failover_median"`
	FailoverMax    string         `json:"failover_max"`
	// FailoverByKind gives, per kind of leader fault, the count, the
	// median and the maximum.
	FailoverByKind map[string]string `json:"failover_by_kind"`
}

// TestRobustness runs the workload and the nemesis against a cluster of
// real masters for -robustness.duration, then checks that no
// acknowledged insert is lost and that both histories are linearizable.
func TestRobustness(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -robustness.seed=%d)", seed, seed)
	dir := outDir(t)
	c := StartCluster(t, dir, *flagNodes)
	h := NewHistory()
	w := NewWorkload(c, h, *flagRequestTimeout)
	if err := w.SetupConfig(t.Context(), c.Nodes[0]); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), *flagDuration)
	defer cancel()
	nem := NewNemesis(c, h, seed)
	var wg sync.WaitGroup
	wg.Go(func() { nem.Run(ctx, t) })
	w.Run(ctx, *flagClients, seed)
	wg.Wait()

	hctx, hcancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer hcancel()
	if err := c.Heal(hctx); err != nil {
		t.Fatalf("heal: %v", err)
	}
	ops := h.Ops()
	sum := Summary{
		Nodes: len(c.Nodes), Clients: *flagClients, Seed: seed, Duration: flagDuration.String(),
		Ops: map[string]map[string]int{}, Lost: map[string]int{}, Linearizable: map[string]string{},
		Errors: map[string]int{}, Faults: map[string]int{}, FailoverByKind: map[string]string{},
	}
	acked := w.Acked()
	sum.Acked = len(acked)
	for _, n := range c.Nodes {
		seen, err := w.ReadBack(hctx, n)
		if err != nil {
			t.Fatalf("read back on %s: %v", n.ID, err)
		}
		for uid := range acked {
			if !seen[uid] {
				sum.Lost[n.ID]++
			}
		}
		extra := 0
		for uid := range seen {
			if !acked[uid] {
				extra++
			}
		}
		sum.Extra = max(sum.Extra, extra)
	}
	countOps(&sum, ops)
	for _, f := range nem.Faults {
		k := f.Kind
		if f.Leader {
			k += ", leader"
		}
		sum.Faults[k]++
	}
	var all []time.Duration
	byKind := make(map[string][]time.Duration)
	for _, f := range FailoverTimes(nem.Faults, ops) {
		all = append(all, f.Time)
		byKind[f.Kind] = append(byKind[f.Kind], f.Time)
	}
	if len(all) > 0 {
		sum.FailoverMedian, sum.FailoverMax = medianMax(all)
	}
	for k, ds := range byKind {
		med, mx := medianMax(ds)
		sum.FailoverByKind[k] = fmt.Sprintf("n=%d median %s max %s", len(ds), med, mx)
	}
	if b, err := json.MarshalIndent(nem.Faults, "", "  "); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "faults.json"), b, 0o644); err != nil {
			t.Error(err)
		}
	}

	if err := h.WriteFile(filepath.Join(dir, "history.jsonl")); err != nil {
		t.Error(err)
	}
	var findingOps, configOps []Op
	for _, op := range ops {
		if op.Key == "config" {
			configOps = append(configOps, op)
		} else {
			findingOps = append(findingOps, op)
		}
	}
	for _, m := range []struct {
		name  string
		model porcupine.Model
		ops   []Op
	}{{"findings", FindingModel, findingOps}, {"config", ConfigModel, configOps}} {
		res, info := porcupine.CheckOperationsVerbose(m.model, Porcupine(m.ops), 5*time.Minute)
		sum.Linearizable[m.name] = string(res)
		switch res {
		case porcupine.Illegal:
			path := filepath.Join(dir, m.name+".html")
			if err := porcupine.VisualizePath(m.model, info, path); err != nil {
				t.Error(err)
			}
			t.Errorf("the %s history is not linearizable: see %s (run with -robustness.out to keep it)", m.name, path)
		case porcupine.Unknown:
			t.Logf("the %s history's check timed out: linearizability unknown", m.name)
		}
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("summary:\n%s", b)
	for node, lost := range sum.Lost {
		if lost > 0 {
			t.Errorf("%d acknowledged inserts missing on %s", lost, node)
		}
	}
	if sum.Acked == 0 {
		t.Error("no insert was acknowledged")
	}
	if *flagMaxErrors >= 0 && sum.ErrorsTotal > *flagMaxErrors {
		t.Errorf("%d client-visible errors, over the budget of %d (-robustness.max-errors)", sum.ErrorsTotal, *flagMaxErrors)
	}
}

// medianMax returns the median and the maximum of ds (not empty),
// rounded to the millisecond.
func medianMax(ds []time.Duration) (median, maximum string) {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2].Round(time.Millisecond).String(), ds[len(ds)-1].Round(time.Millisecond).String()
}

// countOps fills the operation and error counts of sum.
func countOps(sum *Summary, ops []Op) {
	for _, op := range ops {
		m := sum.Ops[op.Kind]
		if m == nil {
			m = map[string]int{}
			sum.Ops[op.Kind] = m
		}
		switch {
		case op.OK():
			m["ok"]++
			continue
		case op.Unknown():
			m["unknown"]++
		default:
			m["failed"]++
		}
		if op.Err == "canceled" {
			continue // the run ended under it
		}
		kind := op.Err
		if op.Status != 0 {
			kind = strings.TrimSpace(fmt.Sprintf("%d %s %s", op.Status, op.Code, gist(op.Msg)))
		}
		sum.Errors[kind]++
		sum.ErrorsTotal++
	}
}

// gist returns the words of an error message before the first one that
// names something particular (a node, an address, a duration: any word
// with a digit), so that messages of one kind count together: "cannot
// reach leader m2 at …" → "(cannot reach leader)".
func gist(msg string) string {
	var words []string
	for w := range strings.FieldsSeq(msg) {
		if strings.ContainsAny(w, "0123456789") {
			break
		}
		words = append(words, w)
	}
	if len(words) == 0 {
		return ""
	}
	return "(" + strings.Join(words, " ") + ")"
}

// TestPartition_LeaderLosesLeadership isolates the leader with the
// Network: the majority elects a new leader in a later term and accepts
// writes, the old leader steps down (its outbound heartbeats are cut as
// well as its inbound traffic), and once healed it follows the new
// leader and serves the write made without it.
func TestPartition_LeaderLosesLeadership(t *testing.T) {
	c := StartCluster(t, outDir(t), 3)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.View(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	c.Net.Isolate(old.Index)
	var others []*Node
	for _, n := range c.Nodes {
		if n != old {
			others = append(others, n)
			if !c.Net.Blocked(n.Index, old.Index) || !c.Net.Blocked(old.Index, n.Index) {
				t.Fatalf("%s and %s not blocked both ways", n.ID, old.ID)
			}
		}
	}
	var leader string
	if err := poll(ctx, func() error {
		for _, n := range others {
			v, err := c.View(ctx, n)
			if err != nil {
				return err
			}
			if v.State == "Leader" && v.Term > before.Term {
				leader = v.NodeID
				return nil
			}
		}
		return fmt.Errorf("no new leader among %d nodes", len(others))
	}); err != nil {
		t.Fatalf("the majority elected no new leader: %v", err)
	}
	if err := poll(ctx, func() error {
		v, err := c.View(ctx, old)
		if err != nil {
			return err
		}
		if v.State == "Leader" {
			return fmt.Errorf("%s still leads in term %d", old.ID, v.Term)
		}
		return nil
	}); err != nil {
		t.Fatalf("the partitioned leader did not step down: %v", err)
	}
	t.Logf("%s isolated: %s leads the majority", old.ID, leader)

	// An insert through the majority succeeds while the old leader is
	// cut (retried on a 503: inserts are idempotent).
	h := NewHistory()
	w := NewWorkload(c, h, 10*time.Second)
	if err := poll(ctx, func() error {
		if op := w.insert(ctx, others[1], 0, 1); !op.OK() {
			return fmt.Errorf("insert: %+v", op)
		}
		return nil
	}); err != nil {
		t.Fatalf("insert through the majority: %v", err)
	}
	uids := w.Acked()
	v, err := c.View(ctx, others[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Net.Heal()
	if err := poll(ctx, func() error {
		got, err := c.View(ctx, old)
		if err != nil {
			return err
		}
		if got.LeaderID != leader || got.AppliedIndex < v.AppliedIndex {
			return fmt.Errorf("%s follows %q at index %d, want %s at %d", old.ID, got.LeaderID, got.AppliedIndex, leader, v.AppliedIndex)
		}
		return nil
	}); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	seen, err := w.ReadBack(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	for uid := range uids {
		if !seen[uid] {
			t.Fatalf("the insert made during the partition is not listed through %s", old.ID)
		}
	}
}
