package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
)

func rulesetTree(rules ...string) *config.Node {
	root := config.NewRoot()
	rs := &config.Node{Kind: config.KindRuleset, Name: "rs"}
	for _, r := range rules {
		rs.Rules = append(rs.Rules, &config.Rule{Name: r, Active: true})
	}
	root.Children = []*config.Node{{Kind: config.KindFilter, Name: "t", Active: true, Children: []*config.Node{rs}}}
	return root
}

// draftEditCount returns the number of stored draft edits of f's state file.
func draftEditCount(t *testing.T, f *fsm) int {
	t.Helper()
	n := 0
	err := f.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketDraftEdits); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFSM_DraftEdit applies edits of parts of the draft: each is checked
// against the draft, stored as itself (not the whole tree), replayed when
// the state file is opened again, and stored whole on deploy.
func TestFSM_DraftEdit(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1000)
	fsmApply(t, f, 1, ReplaceActive{Tree: rulesetTree("a", "b")})
	fsmApply(t, f, 2, CreateDraft{ID: "d", Owner: "alice", Now: now})
	rs := []string{"root", "t", "rs"}
	idx := uint64(3)
	apply := func(e *config.Edit, user string) Result {
		t.Helper()
		r := fsmApply(t, f, idx, DraftEdit{ID: "d", User: user, Edit: e, Now: now.Add(time.Duration(idx) * time.Millisecond)})
		idx++
		return r
	}
	before, _ := f.draft()
	refused := []struct {
		name string
		edit *config.Edit
		user string
		want error
	}{
		{"not the owner", &config.Edit{Op: config.EditDeleteRule, Path: rs, RuleName: "a"}, "bob", ErrNotOwner},
		{"duplicate rule", &config.Edit{Op: config.EditAddRule, Path: rs, Rule: &config.Rule{Name: "a"}}, "alice", config.ErrDuplicateName},
		{"invalid rule name", &config.Edit{Op: config.EditAddRule, Path: rs, Rule: &config.Rule{Name: "a-b"}}, "alice", config.ErrInvalidName},
		{"rule name too long", &config.Edit{Op: config.EditAddRule, Path: rs, Rule: &config.Rule{Name: string(make([]byte, 70000))}}, "alice", config.ErrLimit},
		{"missing rule", &config.Edit{Op: config.EditDeleteRule, Path: rs, RuleName: "zz"}, "alice", config.ErrNoRule},
		{"missing node", &config.Edit{Op: config.EditDeleteNode, Path: []string{"root", "zz"}}, "alice", config.ErrNoNode},
		{"not a ruleset", &config.Edit{Op: config.EditDeleteRule, Path: []string{"root", "t"}, RuleName: "a"}, "alice", config.ErrNotRuleset},
		{"position", &config.Edit{Op: config.EditMoveRule, Path: rs, RuleName: "a", Position: 2}, "alice", config.ErrPosition},
		{"nested iterator", &config.Edit{Op: config.EditAddNode, Path: []string{"root"}, Node: &config.Node{Kind: config.KindIterator, Name: "i", Target: "${event.x}",
			Children: []*config.Node{{Kind: config.KindIterator, Name: "j", Target: "${event.y}"}}}}, "alice", config.ErrNestedIterator},
		{"node name taken", &config.Edit{Op: config.EditAddNode, Path: []string{"root"}, Node: &config.Node{Kind: config.KindRuleset, Name: "t"}}, "alice", config.ErrDuplicateName},
		{"child of a ruleset", &config.Edit{Op: config.EditAddNode, Path: rs, Node: &config.Node{Kind: config.KindRuleset, Name: "x"}}, "alice", config.ErrNoChildren},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			if r := apply(tc.edit, tc.user); !errors.Is(r.Err, tc.want) {
				t.Fatalf("err %v, want %v", r.Err, tc.want)
			}
			d, _ := f.draft()
			equalTrees(t, d.Tree, before.Tree)
		})
	}

	// Each edit, and the same change made on a copy of the whole tree.
	want := before.Tree.Clone()
	wantRS := want.Find([]string{"t", "rs"})
	edits := []struct {
		edit   *config.Edit
		change func()
	}{
		{&config.Edit{Op: config.EditAddRule, Path: rs, Rule: &config.Rule{Name: "c", Active: true}}, func() {
			wantRS.Rules = append(wantRS.Rules, &config.Rule{Name: "c", Active: true})
		}},
		{&config.Edit{Op: config.EditUpdateRule, Path: rs, RuleName: "a", Rule: &config.Rule{Name: "a2", Description: "x"}}, func() {
			wantRS.Rules[0] = &config.Rule{Name: "a2", Description: "x"}
		}},
		{&config.Edit{Op: config.EditMoveRule, Path: rs, RuleName: "c", Position: 0}, func() {
			wantRS.Rules = []*config.Rule{wantRS.Rules[2], wantRS.Rules[0], wantRS.Rules[1]}
		}},
		{&config.Edit{Op: config.EditDeleteRule, Path: rs, RuleName: "b"}, func() { wantRS.Rules = wantRS.Rules[:2] }},
		{&config.Edit{Op: config.EditAddNode, Path: []string{"root"}, Node: &config.Node{Kind: config.KindFilter, Name: "u", Active: true}}, func() {
			want.Children = append(want.Children, &config.Node{Kind: config.KindFilter, Name: "u", Active: true})
		}},
		{&config.Edit{Op: config.EditUpdateNode, Path: []string{"root", "u"}, Node: &config.Node{Kind: config.KindFilter, Name: "v", Description: "d"}}, func() {
			want.Children[1].Name, want.Children[1].Description, want.Children[1].Active = "v", "d", false
		}},
		{&config.Edit{Op: config.EditReplaceNode, Path: []string{"root", "v"}, Node: &config.Node{Kind: config.KindRuleset, Name: "w"}}, func() {
			want.Children[1] = &config.Node{Kind: config.KindRuleset, Name: "w"}
		}},
		{&config.Edit{Op: config.EditDeleteNode, Path: []string{"root", "w"}}, func() { want.Children = want.Children[:1] }},
	}
	for i, tc := range edits {
		if r := apply(tc.edit, "alice"); r.Err != nil {
			t.Fatalf("edit %d (%s): %v", i, tc.edit.Op, r.Err)
		}
		tc.change()
		d, _ := f.draft()
		equalTrees(t, d.Tree, want)
		if size, err := config.TreeSize(d.Tree); err != nil || f.st.draftSize != size {
			t.Fatalf("edit %d: tracked size %d, encoded size %d (%v)", i, f.st.draftSize, size, err)
		}
	}
	// The active tree was not touched, nor shared subtrees with it.
	active, _ := f.active()
	equalTrees(t, active, rulesetTree("a", "b"))
	if n := draftEditCount(t, f); n != len(edits) {
		t.Fatalf("%d stored edits, want %d", n, len(edits))
	}

	// Opening the state file again replays the edits.
	g := reopenFSM(t, f)
	d, _ := g.draft()
	equalTrees(t, d.Tree, want)
	if d.UpdatedMS != now.Add(time.Duration(idx-1)*time.Millisecond).UnixMilli() || g.st.draftEdits != len(edits) {
		t.Fatalf("reopened: updated %d, %d edits", d.UpdatedMS, g.st.draftEdits)
	}

	// A deploy stores the tree whole and forgets the edits.
	f = g
	fsmApply(t, f, idx, Deploy{ID: "d", User: "alice"})
	active, _ = f.active()
	equalTrees(t, active, want)
	if n := draftEditCount(t, f); n != 0 || f.st.draftEdits != 0 {
		t.Fatalf("%d stored edits after deploy", n)
	}
}

// TestFSM_DraftEditCompaction checks that the draft is stored whole again
// after maxDraftEdits edits.
func TestFSM_DraftEditCompaction(t *testing.T) {
	f := newTestFSM(t)
	fsmApply(t, f, 1, ReplaceActive{Tree: rulesetTree()})
	fsmApply(t, f, 2, CreateDraft{ID: "d", Owner: "alice", Now: time.UnixMilli(1)})
	for i := range maxDraftEdits + 3 {
		e := &config.Edit{Op: config.EditAddRule, Path: []string{"root", "t", "rs"}, Rule: &config.Rule{Name: fmt.Sprintf("r%d", i)}}
		if r := fsmApply(t, f, uint64(3+i), DraftEdit{ID: "d", User: "alice", Edit: e, Now: time.UnixMilli(2)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if n := draftEditCount(t, f); n != 3 {
		t.Fatalf("%d stored edits, want 3 after a compaction", n)
	}
	d, _ := f.draft()
	if n := len(d.Tree.Find([]string{"t", "rs"}).Rules); n != maxDraftEdits+3 || f.st.draftEdits != 3 {
		t.Fatalf("%d rules, %d edits", n, f.st.draftEdits)
	}
	// The stored tree is the draft's after the compacting edit.
	ex, err := config.DecodeExport(f.st.draftJSON)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ex.Node.Find([]string{"t", "rs"}).Rules); n != maxDraftEdits {
		t.Fatalf("stored tree has %d rules, want %d", n, maxDraftEdits)
	}
}

// TestFSM_DeployScoped checks that a scoped deploy is decided against the
// draft of the moment it is applied: refused, changing nothing, while the
// draft differs outside the scope; applied once it differs only below.
func TestFSM_DeployScoped(t *testing.T) {
	f := newTestFSM(t)
	active := treeWith("acme", "other")
	fsmApply(t, f, 1, ReplaceActive{Tree: active})
	fsmApply(t, f, 2, CreateDraft{ID: "d", Owner: "alice", Now: time.UnixMilli(1)})
	acme := []string{"root", "acme"}
	edit := func(idx uint64, e *config.Edit) {
		t.Helper()
		if r := fsmApply(t, f, idx, DraftEdit{ID: "d", User: "alice", Edit: e, Now: time.UnixMilli(2)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	edit(3, &config.Edit{Op: config.EditAddNode, Path: acme, Node: &config.Node{Kind: config.KindRuleset, Name: "mine"}})
	edit(4, &config.Edit{Op: config.EditUpdateNode, Path: []string{"root", "other"}, Node: &config.Node{Kind: config.KindFilter, Name: "other", Active: false}})
	r := fsmApply(t, f, 5, DeployScoped{ID: "d", User: "alice", Scope: acme})
	var oos *OutOfScopeError
	if !errors.As(r.Err, &oos) || !errors.Is(r.Err, ErrOutOfScope) || len(oos.Paths) != 1 || oos.Paths[0] != "root.other" {
		t.Fatalf("err %v, want out of scope at root.other", r.Err)
	}
	if got, idx := f.active(); idx != 1 || !config.NodeEqual(got, active) {
		t.Fatal("a refused deploy changed the active tree")
	}
	if r := fsmApply(t, f, 6, DeployScoped{ID: "d", User: "bob", Scope: acme}); !errors.Is(r.Err, ErrNotOwner) {
		t.Fatalf("another user's deploy: %v", r.Err)
	}
	// Undo the change outside: the deploy goes through.
	edit(7, &config.Edit{Op: config.EditUpdateNode, Path: []string{"root", "other"}, Node: &config.Node{Kind: config.KindFilter, Name: "other", Active: true}})
	if r := fsmApply(t, f, 8, DeployScoped{ID: "d", User: "alice", Scope: acme}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got, _ := f.active(); got.Find([]string{"acme", "mine"}) == nil {
		t.Fatal("the scoped deploy did not make the draft active")
	}
}
