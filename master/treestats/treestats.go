// Package treestats sums the engines' counters of the processing tree
// (their heartbeats carry them, master/fleet) and serves them: GET
// /squall/v1/tree/stats.
//
// Each engine sends, for the tree it runs, its counts cumulative since it
// installed the tree, with the id of its instance (a run of the process)
// and the tree's index. The master keeps the last counts of each (engine,
// instance, tree index) and sums them over instances: a heartbeat lost or
// repeated changes nothing, an engine restarted is a new instance that
// starts at zero and so counts nothing twice, and a deploy (a new index)
// starts fresh. Rolling windows (1 min, 1 h, 24 h) subtract from the sums
// a snapshot of them taken about that long ago.
//
// It all lives in the memory of the master that takes the heartbeats (the
// leader): it is not replicated (docs/decisions.md decision 56). A new
// leader has the sums since the deploy again after one heartbeat of every
// engine (they are cumulative); its windows start from its first snapshot,
// and the answer says from when.
package treestats

import (
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/master/fleet"
)

// Windows of the stats, besides "deploy" (since the tree's deploy).
var windows = map[string]time.Duration{"1m": time.Minute, "1h": time.Hour, "24h": 24 * time.Hour}

// Window names.
const (
	WindowDeploy = "deploy"
)

// Config holds the aggregator's settings.
type Config struct {
	// RetireAfter is how long after its last heartbeat an engine
	// instance's counts are folded into its tree's sum of retired
	// instances (default 5 min): memory follows the live instances.
	RetireAfter time.Duration
	// MaxTrees bounds the trees (indexes) kept; the lowest go first
	// (default 4: the active tree and those of a deploy rolling out).
	MaxTrees int
	// SnapshotEvery is the period of the windows' snapshots (default
	// 1 min).
	SnapshotEvery time.Duration
}

// Default returns the default settings.
func Default() Config {
	return Config{RetireAfter: 5 * time.Minute, MaxTrees: 4, SnapshotEvery: time.Minute}
}

// Aggregator keeps the engines' counts. It is safe for concurrent use.
type Aggregator struct {
	cfg Config

	mu    sync.Mutex
	trees map[uint64]*treeSums
}

// New returns an empty aggregator; zero settings take Default's.
func New(cfg Config) *Aggregator {
	d := Default()
	if cfg.RetireAfter <= 0 {
		cfg.RetireAfter = d.RetireAfter
	}
	if cfg.MaxTrees <= 0 {
		cfg.MaxTrees = d.MaxTrees
	}
	if cfg.SnapshotEvery <= 0 {
		cfg.SnapshotEvery = d.SnapshotEvery
	}
	return &Aggregator{cfg: cfg, trees: map[uint64]*treeSums{}}
}

var _ fleet.StatsSink = (*Aggregator)(nil)

// vec is the counts of a node or a rule: reached, matched, and for rules
// actions, succeeded, failed.
type vec [5]uint64

const (
	cReached = iota
	cMatched
	cActions
	cSucceeded
	cFailed
)

// counts are the counts of a tree, by key: a node's path joined by "/"
// (nodeKey), a rule's its ruleset's key, a NUL byte and its name
// (ruleKey), so that a rule never shares a node's key.
type counts struct {
	events uint64
	by     map[string]vec
	last   map[string]int64 // rules' last match, epoch ms
}

func newCounts() counts { return counts{by: map[string]vec{}, last: map[string]int64{}} }

func nodeKey(path []string) string { return strings.Join(path, "/") }

func ruleKey(path []string, rule string) string { return nodeKey(path) + "\x00" + rule }

// add adds o to c.
func (c *counts) add(o *counts) {
	c.events += o.events
	for k, v := range o.by {
		s := c.by[k]
		for i := range v {
			s[i] += v[i]
		}
		c.by[k] = s
	}
	for k, t := range o.last {
		c.last[k] = max(c.last[k], t)
	}
}

// clone returns a copy of c.
func (c *counts) clone() counts {
	out := newCounts()
	out.add(c)
	return out
}

func fromReport(st *fleet.TreeStats) counts {
	c := counts{events: st.Events, by: make(map[string]vec, len(st.Nodes)), last: map[string]int64{}}
	for _, n := range st.Nodes {
		c.by[nodeKey(n.Path)] = vec{n.Reached, n.Matched}
		for _, r := range n.Rules {
			k := ruleKey(n.Path, r.Name)
			c.by[k] = vec{r.Reached, r.Matched, r.Actions, r.Succeeded, r.Failed}
			if r.LastMatchMS > 0 {
				c.last[k] = r.LastMatchMS
			}
		}
	}
	return c
}

// treeSums are the counts of one tree.
type treeSums struct {
	index     uint64
	instances map[string]*instance // by member "/" instance
	// retired sums the last counts of the instances retired.
	retired counts
	// since is the earliest LoadedMS of the instances counted.
	since time.Time
	// snaps are snapshots of the sums, oldest first.
	snaps []snapshot
	seq   int
}

type instance struct {
	member    string
	id        string
	counts    counts
	seen      time.Time
	truncated bool
}

type snapshot struct {
	at  time.Time
	seq int
	c   counts
}

// AddTreeStats records the last counts of an engine instance.
func (a *Aggregator) AddTreeStats(member string, st *fleet.TreeStats, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.trees[st.TreeIndex]
	if t == nil {
		t = &treeSums{index: st.TreeIndex, instances: map[string]*instance{}, retired: newCounts()}
		a.trees[st.TreeIndex] = t
		a.dropOldTrees()
	}
	loaded := time.UnixMilli(st.LoadedMS)
	if t.since.IsZero() || loaded.Before(t.since) {
		t.since = loaded
	}
	t.instances[member+"/"+st.Instance] = &instance{member: member, id: st.Instance, counts: fromReport(st), seen: now, truncated: st.Truncated}
	a.tick(t, now)
}

// dropOldTrees keeps the MaxTrees highest indexes. a.mu is held.
func (a *Aggregator) dropOldTrees() {
	for len(a.trees) > a.cfg.MaxTrees {
		lowest := uint64(0)
		for idx := range a.trees {
			if lowest == 0 || idx < lowest {
				lowest = idx
			}
		}
		delete(a.trees, lowest)
	}
}

// tick retires the instances silent for RetireAfter and takes a snapshot
// when the last is SnapshotEvery old. a.mu is held.
func (a *Aggregator) tick(t *treeSums, now time.Time) {
	for k, in := range t.instances {
		if now.Sub(in.seen) >= a.cfg.RetireAfter {
			t.retired.add(&in.counts)
			delete(t.instances, k)
		}
	}
	if n := len(t.snaps); n > 0 && now.Sub(t.snaps[n-1].at) < a.cfg.SnapshotEvery {
		return
	}
	t.seq++
	t.snaps = append(t.snaps, snapshot{at: now, seq: t.seq, c: t.sum()})
	// Kept: the last three, one in five for 66 periods, one in sixty
	// for 25 hours' worth: enough for each window, about 40 in all.
	every := a.cfg.SnapshotEvery
	kept := t.snaps[:0]
	for _, s := range t.snaps {
		age := now.Sub(s.at)
		if t.seq-s.seq < 3 || (s.seq%5 == 0 && age < 66*every) || (s.seq%60 == 0 && age < 25*time.Hour+2*every) {
			kept = append(kept, s)
		}
	}
	clear(t.snaps[len(kept):])
	t.snaps = kept
}

// sum returns the sums over the instances, retired ones included.
func (t *treeSums) sum() counts {
	c := t.retired.clone()
	for _, in := range t.instances {
		c.add(&in.counts)
	}
	return c
}
