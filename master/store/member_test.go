package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFSM_Members(t *testing.T) {
	t.Parallel()
	f := newTestFSM(t)
	if r := fsmApply(t, f, 1, SetMember{ID: "n1", HTTPAddr: "10.0.0.1:8080"}); r.Err != nil || r.Index != 1 {
		t.Fatalf("set: %+v", r)
	}
	fsmApply(t, f, 2, SetMember{ID: "n2", HTTPAddr: "10.0.0.2:8080"})
	fsmApply(t, f, 3, SetMember{ID: "n1", HTTPAddr: "10.0.0.9:8080"})
	if got, want := f.members(), map[string]string{"n1": "10.0.0.9:8080", "n2": "10.0.0.2:8080"}; !maps.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if r := fsmApply(t, f, 4, DeleteMember{ID: "n2"}); r.Err != nil || r.Index != 4 {
		t.Fatalf("delete: %+v", r)
	}
	// Deleting an unknown member is a no-op, not a refusal.
	if r := fsmApply(t, f, 5, DeleteMember{ID: "nope"}); r.Err != nil || r.Index != 4 {
		t.Fatalf("delete unknown: %+v", r)
	}
	if f.httpAddr("n2") != "" || f.httpAddr("n1") != "10.0.0.9:8080" {
		t.Fatalf("members %v", f.members())
	}
	// Members are in snapshots.
	g := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, f)))); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(g.members(), f.members()) {
		t.Fatalf("restored members %v, want %v", g.members(), f.members())
	}
}

func TestFSM_MembersSurviveReopen(t *testing.T) {
	t.Parallel()
	m, _ := newMetrics(nil)
	path := filepath.Join(t.TempDir(), fsmDBName)
	f, err := openFSM(path, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	fsmApply(t, f, 1, SetMember{ID: "n1", HTTPAddr: "h:1"})
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	g, err := openFSM(path, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if g.httpAddr("n1") != "h:1" {
		t.Fatalf("members after reopen %v", g.members())
	}
}

func TestFSM_RestoreState(t *testing.T) {
	t.Parallel()
	f := newTestFSM(t)
	fsmApply(t, f, 1, CreateDraft{ID: "old", Owner: "bob"})
	fsmApply(t, f, 2, SetMember{ID: "n1", HTTPAddr: "h:1"})
	active := mustTree(t, richTree)
	draft := &Draft{ID: "d1", Owner: "alice", CreatedMS: 10, UpdatedMS: 20, Tree: treeWith("x")}

	r := fsmApply(t, f, 3, RestoreState{Active: active, Draft: draft})
	if r.Err != nil || r.Index != 3 {
		t.Fatalf("restore: %+v", r)
	}
	tree, idx := f.active()
	equalTrees(t, tree, active)
	if idx != 3 {
		t.Fatalf("active index %d", idx)
	}
	d, err := f.draft()
	if err != nil || !reflect.DeepEqual(d, draft) {
		t.Fatalf("draft %+v %v", d, err)
	}
	if f.httpAddr("n1") != "h:1" {
		t.Fatal("restore touched the members")
	}

	// Without a draft the draft is deleted.
	if r := fsmApply(t, f, 4, RestoreState{Active: treeWith("y")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := f.draft(); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("draft after restoring none: %v", err)
	}

	// An invalid tree is refused and changes nothing.
	r = fsmApply(t, f, 5, RestoreState{Active: treeWith("z"), Draft: &Draft{ID: "d", Owner: "o", Tree: invalidTree()}})
	if !errors.Is(r.Err, ErrInvalidTree) || r.Index != 4 {
		t.Fatalf("invalid restore: %+v", r)
	}
	if tree, idx := f.active(); idx != 4 || !reflect.DeepEqual(childNames(tree), []string{"y"}) {
		t.Fatalf("state changed by a refused restore: %v %d", childNames(tree), idx)
	}
}

func TestBackup_RoundTrip(t *testing.T) {
	t.Parallel()
	b := &Backup{Index: 7, ActiveIndex: 5, Active: mustTree(t, richTree),
		Draft: &Draft{ID: "d1", Owner: "alice", CreatedMS: 1, UpdatedMS: 2, Tree: treeWith("a")}}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBackup(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	equalTrees(t, got.Active, b.Active)
	if got.Index != 7 || got.ActiveIndex != 5 || !reflect.DeepEqual(got.Draft, b.Draft) {
		t.Fatalf("decoded %+v", got)
	}
	data, err = json.Marshal(&Backup{Active: treeWith()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"format":1,"index":0,"active_index":0,"active":{`) || !strings.HasSuffix(string(data), `"draft":null}`) {
		t.Fatalf("backup file %s", data)
	}

	for _, tc := range []struct{ name, file, err string }{
		{"not JSON", `nope`, "decode backup"},
		{"unknown field", `{"format":1,"index":0,"active_index":0,"active":null,"draft":null,"x":1}`, "unknown field"},
		{"newer format", strings.Replace(string(data), `"format":1`, `"format":2`, 1), "format 2"},
		{"no active tree", `{"format":1,"index":0,"active_index":0,"active":null,"draft":null}`, "no active tree"},
		{"draft without owner", strings.Replace(string(data), `"draft":null`, `"draft":{"id":"d","owner":"","created_ms":0,"updated_ms":0,"tree":null}`, 1), "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBackup(strings.NewReader(tc.file)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}

// TestStore_MembersAndBackup runs SetMember, Remove, Backup and Restore
// on a real cluster.
func TestStore_MembersAndBackup(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil)
	leader := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 20*time.Second)
	for i, s := range nodes {
		if err := leader.SetMember(ctx, s.ID(), "127.0.0.1:"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	idx := leader.Index()
	// Setting the same address again submits nothing.
	if err := leader.SetMember(ctx, nodes[0].ID(), "127.0.0.1:1"); err != nil || leader.Index() != idx {
		t.Fatalf("repeated SetMember: %v, index %d -> %d", err, idx, leader.Index())
	}
	follower := others(nodes, leader)[0]
	if err := follower.SetMember(ctx, "x", "y:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SetMember on a follower: %v", err)
	}
	waitConverged(t, nodes)
	st, err := follower.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.HTTPAddr != follower.HTTPAddr(m.ID) || m.HTTPAddr == "" {
			t.Fatalf("member %+v", m)
		}
	}

	// Removing a member forgets its HTTP address.
	gone := others(nodes, leader)[1]
	if err := leader.Remove(ctx, gone.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return follower.HTTPAddr(gone.ID()) == "" }, "the removed member's address to go")
	if ids := memberIDs(t, leader); len(ids) != 2 {
		t.Fatalf("members %v", ids)
	}

	// Backup, change everything, restore.
	if _, err := leader.ReplaceActive(ctx, mustTree(t, richTree)); err != nil {
		t.Fatal(err)
	}
	draftID, err := leader.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.Backup()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("later")); err != nil {
		t.Fatal(err)
	}
	if err := leader.DeleteDraft(ctx, draftID, "alice"); err != nil {
		t.Fatal(err)
	}
	restored, err := leader.Restore(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { _, i := follower.Active(); return i == restored }, "the follower to apply the restore")
	tree, _ := follower.Active()
	equalTrees(t, tree, mustTree(t, richTree))
	if d, err := follower.Draft(); err != nil || d.ID != draftID || d.Owner != "alice" {
		t.Fatalf("restored draft %+v %v", d, err)
	}
	if _, err := follower.Restore(ctx, b); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("restore on a follower: %v", err)
	}
}
