package robustness

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Fault is one action of the nemesis.
type Fault struct {
	// Kind is "kill", "stop" or "partition"; Node the node it hit;
	// Leader whether that node led when it was hit.
	Kind   string `json:"kind"`
	Node   string `json:"node"`
	Leader bool   `json:"leader"`
	// Start and End are history times (ns) of the fault and of its
	// healing.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Nemesis breaks a Cluster, one fault at a time: it SIGKILLs a node
// (restarted after a delay), SIGSTOPs one (SIGCONT after a delay), or
// partitions one (in clusters of 5, sometimes two) from the others with
// the Network. Half of the faults hit
// the leader, the others a random node.
type Nemesis struct {
	c   *Cluster
	h   *History
	rng *mrand.Rand
	// Every is the pause between faults and Hold how long a fault lasts:
	// each drawn uniformly between the bounds.
	Every, Hold [2]time.Duration
	Faults      []Fault
}

// NewNemesis returns a nemesis with the suite's default pacing.
func NewNemesis(c *Cluster, h *History, seed int64) *Nemesis {
	return &Nemesis{
		c: c, h: h, rng: mrand.New(mrand.NewPCG(uint64(seed), 0xfa17)),
		Every: [2]time.Duration{2 * time.Second, 4 * time.Second},
		Hold:  [2]time.Duration{2 * time.Second, 5 * time.Second},
	}
}

func (n *Nemesis) between(b [2]time.Duration) time.Duration {
	return b[0] + time.Duration(n.rng.Int64N(int64(b[1]-b[0])+1))
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Run injects faults until ctx ends, then heals the cluster.
func (n *Nemesis) Run(ctx context.Context, t *testing.T) {
	for sleep(ctx, n.between(n.Every)) {
		target := n.c.Nodes[n.rng.IntN(len(n.c.Nodes))]
		leader, err := n.c.Leader(ctx)
		isLeader := err == nil && leader == target
		if n.rng.IntN(2) == 0 && err == nil {
			target, isLeader = leader, true
		}
		f := Fault{Kind: []string{"kill", "stop", "partition"}[n.rng.IntN(3)], Node: target.ID, Leader: isLeader, Start: n.h.Now()}
		switch f.Kind {
		case "kill":
			n.c.Kill(target)
		case "stop":
			n.c.Stop(target)
		case "partition":
			// Isolate the target, or, in a cluster of 5 or more, cut
			// it and another node off from the majority together.
			minority := []int{target.Index}
			if len(n.c.Nodes) >= 5 && n.rng.IntN(2) == 0 {
				other := n.c.Nodes[(target.Index+1+n.rng.IntN(len(n.c.Nodes)-1))%len(n.c.Nodes)]
				minority = append(minority, other.Index)
				f.Node += "+" + other.ID
			}
			var majority []int
			for _, node := range n.c.Nodes {
				if !slices.Contains(minority, node.Index) {
					majority = append(majority, node.Index)
				}
			}
			n.c.Net.Partition(minority, majority)
		}
		t.Logf("nemesis: %s %s (leader %v)", f.Kind, f.Node, f.Leader)
		sleep(ctx, n.between(n.Hold)) // heal even when the run is over
		switch f.Kind {
		case "kill":
			if err := n.c.Start(target); err != nil {
				t.Errorf("nemesis: restart %s: %v", target.ID, err)
			}
		case "stop":
			n.c.Cont(target)
		case "partition":
			n.c.Net.Heal()
		}
		f.End = n.h.Now()
		n.Faults = append(n.Faults, f)
		// Next fault once every node is back, so that faults do not
		// pile up into a lost quorum.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		for _, node := range n.c.Nodes {
			if err := n.c.WaitReady(wctx, node); err != nil {
				t.Errorf("nemesis: %s not ready after %s: %v", node.ID, f.Kind, err)
			}
		}
		cancel()
	}
}

// Failover is the failover time of a fault that hit the leader.
type Failover struct {
	// Kind is the fault's kind; Time the time from the fault to the
	// first acknowledged write called after it.
	Kind string
	Time time.Duration
}

// FailoverTimes returns, for each fault that hit the leader, the time
// from the fault to the return of the first write acknowledged that was
// called after it (writes succeed again: a new leader, or the old one
// back).
func FailoverTimes(faults []Fault, ops []Op) []Failover {
	var out []Failover
	for _, f := range faults {
		if !f.Leader {
			continue
		}
		best := int64(-1)
		for _, op := range ops {
			if op.Write() && op.OK() && !op.Unknown() && op.Call >= f.Start && (best < 0 || op.Return < best) {
				best = op.Return
			}
		}
		if best >= 0 {
			out = append(out, Failover{Kind: f.Kind, Time: time.Duration(best - f.Start)})
		}
	}
	return out
}

// String describes a fault.
func (f Fault) String() string {
	return fmt.Sprintf("%s %s leader=%v", f.Kind, f.Node, f.Leader)
}
