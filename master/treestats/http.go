package treestats

import (
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/internal/apierror"
)

// Pattern is the route of the stats.
const Pattern = "/squall/v1/tree/stats"

// Tree is the active tree: *store.Store implements it.
type Tree interface {
	Active() (*config.Node, uint64)
}

// Tokens verifies bearer tokens (auth.Verifier).
type Tokens interface {
	Verify(header string) (*auth.Claims, error)
}

var _ Tokens = (*auth.Verifier)(nil)

// Answer is the answer of GET /squall/v1/tree/stats.
type Answer struct {
	// TreeIndex is the active tree's index: the counts are of its deploy.
	TreeIndex uint64 `json:"tree_index"`
	Window    Window `json:"window"`
	// Events is the number of events the engines evaluated, and Engines
	// the engine instances counted with their own events since the
	// deploy; both only for an authorization on the root (the others see
	// their subtree only).
	Events  *uint64  `json:"events,omitempty"`
	Engines []Engine `json:"engines,omitempty"`
	// Nodes are the nodes of the authorization's subtree, in tree order.
	Nodes []Node `json:"nodes"`
}

// Window is the span the counts cover.
type Window struct {
	Name string `json:"name"`
	// FromMS and ToMS bound it (epoch ms). FromMS is 0 when no engine
	// reported the tree yet.
	FromMS int64 `json:"from_ms"`
	ToMS   int64 `json:"to_ms"`
	// Complete is false when the master holds no snapshot that old (it
	// took the heartbeats for a shorter time): the counts start at FromMS.
	Complete bool `json:"complete"`
}

// Engine is one engine instance counted.
type Engine struct {
	ID         string `json:"id"`
	Instance   string `json:"instance"`
	Events     uint64 `json:"events"`
	LastSeenMS int64  `json:"last_seen_ms"`
	Retired    bool   `json:"retired,omitempty"`
	// Truncated: its heartbeat left counts out (fleet.MaxStatsEntries).
	Truncated bool `json:"truncated,omitempty"`
}

// Node is the counts of one node of the active tree.
type Node struct {
	Path    []string `json:"path"`
	Type    string   `json:"type"`
	Reached uint64   `json:"reached"`
	Matched uint64   `json:"matched"`
	// LastMatchMS is the latest last match of its rules since the deploy
	// (rulesets only; 0: none).
	LastMatchMS int64 `json:"last_match_ms,omitempty"`
	// Rules are the counts of its rules, in the heartbeats' form, summed
	// over the engines and the window; a rule's LastMatchMS is that of
	// its last match since the deploy, over every window (0: none).
	Rules []fleet.RuleStats `json:"rules,omitempty"`
}

// Handler serves GET /squall/v1/tree/stats?auth=NAME&window=W: the counts
// of the active tree's nodes and rules in the subtree of the token's
// authorization NAME (view), summed over the engines, over the window
// W: 1m, 1h, 24h or deploy (the default: since the tree's deploy). With
// one authorization in the token, auth may be left out.
func (a *Aggregator) Handler(tree Tree, tokens Tokens) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ans, err := a.serve(r, tree, tokens, time.Now())
		if err != nil {
			e := apierror.Common(err)
			if e == nil {
				e = apierror.Internal(err)
			}
			e, _ = e.Public()
			apierror.Write(w, e)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		apierror.WriteJSON(w, http.StatusOK, ans)
	})
}

func (a *Aggregator) serve(r *http.Request, tree Tree, tokens Tokens, now time.Time) (*Answer, error) {
	claims, err := tokens.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	name := q.Get("auth")
	if name == "" {
		if len(claims.Auths) != 1 {
			return nil, &apierror.Error{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Params: map[string]string{"PARAM": "auth"},
				Message: "the token holds several authorizations: name one with ?auth="}
		}
		for n := range claims.Auths {
			name = n
		}
	}
	scope, err := claims.Scope(name, auth.View)
	if err != nil {
		return nil, err
	}
	window := q.Get("window")
	if window == "" {
		window = WindowDeploy
	}
	if _, ok := windows[window]; !ok && window != WindowDeploy {
		return nil, &apierror.Error{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Params: map[string]string{"PARAM": "window"},
			Message: "window " + quote(window) + ": want 1m, 1h, 24h or deploy"}
	}
	root, index := tree.Active()
	v := a.view(index, window, now)
	ans := &Answer{TreeIndex: index, Window: v.window, Nodes: []Node{}}
	if root == nil {
		return ans, nil
	}
	base := scope.Base()
	n := root
	for _, name := range base[1:] {
		if n = n.Child(name); n == nil {
			// The authorization's node is not in the active tree.
			return ans, nil
		}
	}
	if len(base) == 1 {
		ans.Events, ans.Engines = &v.cur.events, v.engines
	}
	v.walk(base[:len(base)-1], n, &ans.Nodes)
	return ans, nil
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return `"` + s + `"`
}

// view is the counts of a tree over a window.
type view struct {
	window  Window
	engines []Engine
	cur     counts // over the window
	last    map[string]int64
}

// view returns the counts of tree index over window at now.
func (a *Aggregator) view(index uint64, window string, now time.Time) *view {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := &view{window: Window{Name: window, ToMS: now.UnixMilli(), Complete: true}, engines: []Engine{}, cur: newCounts()}
	t := a.trees[index]
	if t == nil {
		v.last = map[string]int64{}
		return v
	}
	for k, in := range t.instances {
		if now.Sub(in.seen) >= a.cfg.RetireAfter {
			t.retired.add(&in.counts)
			delete(t.instances, k)
		}
	}
	for _, in := range t.instances {
		v.engines = append(v.engines, Engine{ID: in.member, Instance: in.id, Events: in.counts.events, LastSeenMS: in.seen.UnixMilli(), Truncated: in.truncated})
	}
	sort.Slice(v.engines, func(i, j int) bool {
		return v.engines[i].ID+"/"+v.engines[i].Instance < v.engines[j].ID+"/"+v.engines[j].Instance
	})
	if t.retired.events > 0 {
		v.engines = append(v.engines, Engine{ID: "retired", Events: t.retired.events, Retired: true})
	}
	cur := t.sum()
	v.last = cur.last
	v.window.FromMS = t.since.UnixMilli()
	d, windowed := windows[window]
	if windowed && t.since.Before(now.Add(-d)) {
		// The newest snapshot at least d old, else the oldest.
		var base *snapshot
		for i := range t.snaps {
			if s := &t.snaps[i]; !s.at.After(now.Add(-d)) {
				base = s
			}
		}
		if base == nil && len(t.snaps) > 0 {
			base = &t.snaps[0]
			v.window.Complete = false
		}
		if base != nil {
			v.window.FromMS = base.at.UnixMilli()
			cur.subtract(&base.c)
		}
	}
	v.cur = cur
	return v
}

// subtract takes o from c, saturating at zero.
func (c *counts) subtract(o *counts) {
	c.events -= min(c.events, o.events)
	for k, s := range c.by {
		b := o.by[k]
		for i := range s {
			s[i] -= min(s[i], b[i])
		}
		c.by[k] = s
	}
}

// walk appends the counts of n and its descendants, in tree order;
// parent is the path of n's parent.
func (v *view) walk(parent []string, n *config.Node, out *[]Node) {
	path := append(slices.Clip(parent), n.Name)
	c := v.cur.by[nodeKey(path)]
	node := Node{Path: path, Type: n.Kind.String(), Reached: c[cReached], Matched: c[cMatched]}
	for _, cr := range n.Rules {
		k := ruleKey(path, cr.Name)
		rc := v.cur.by[k]
		last := v.last[k]
		node.Rules = append(node.Rules, fleet.RuleStats{Name: cr.Name, Reached: rc[cReached], Matched: rc[cMatched], Actions: rc[cActions],
			Succeeded: rc[cSucceeded], Failed: rc[cFailed], LastMatchMS: last})
		node.LastMatchMS = max(node.LastMatchMS, last)
	}
	*out = append(*out, node)
	for _, ch := range n.Children {
		v.walk(path, ch, out)
	}
}
