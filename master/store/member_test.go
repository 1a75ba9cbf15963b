package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
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
	f := newTestFSM(t)
	fsmApply(t, f, 1, SetMember{ID: "n1", HTTPAddr: "h:1"})
	g := reopenFSM(t, f)
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
	f2 := testFinding("b", 2, 9)
	f2.Password, f2.Ticket = "enc:v1:abc", "T-1"
	b := &Backup{Index: 7, ActiveIndex: 5, Active: mustTree(t, richTree),
		Draft:        &Draft{ID: "d1", Owner: "alice", CreatedMS: 1, UpdatedMS: 2, Tree: treeWith("a")},
		WithFindings: true, Findings: []Finding{testFinding("a", 1, 5), f2}}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBackup(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	equalTrees(t, got.Active, b.Active)
	if got.Index != 7 || got.ActiveIndex != 5 || !reflect.DeepEqual(got.Draft, b.Draft) ||
		!got.WithFindings || !reflect.DeepEqual(got.Findings, b.Findings) {
		t.Fatalf("decoded %+v", got)
	}
	data, err = json.Marshal(&Backup{Active: treeWith()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "{"+backupFormatKey+`,"index":0,"active_index":0,"active":{`) || !strings.HasSuffix(string(data), `"draft":null,"findings":[]}`) {
		t.Fatalf("backup file %s", data)
	}

	// A format 1 file (before findings) decodes, without findings.
	v1 := strings.Replace(strings.Replace(string(data), backupFormatKey, `"format":1`, 1), `,"findings":[]`, "", 1)
	if got, err := DecodeBackup(strings.NewReader(v1)); err != nil || got.WithFindings || got.Findings != nil {
		t.Fatalf("format 1: %+v %v", got, err)
	}

	withFinding := func(rec string) string {
		return strings.Replace(string(data), `"findings":[]`, `"findings":[`+rec+`]`, 1)
	}
	rec, err := json.Marshal(findingRecord(testFinding("a", 1, 5)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, err string }{
		{"not JSON", `nope`, "decode backup"},
		{"unknown field", `{"format":1,"index":0,"active_index":0,"active":null,"draft":null,"x":1}`, "unknown key"},
		{"newer format", strings.Replace(string(data), backupFormatKey, fmt.Sprintf(`"format":%d`, BackupFormat+1), 1), fmt.Sprintf("format %d", BackupFormat+1)},
		{"no active tree", `{"format":1,"index":0,"active_index":0,"active":null,"draft":null}`, "no active tree"},
		{"draft without owner", strings.Replace(string(data), `"draft":null`, `"draft":{"id":"d","owner":"","created_ms":0,"updated_ms":0,"tree":null}`, 1), "owner"},
		{"format 2 without findings", strings.Replace(string(data), `,"findings":[]`, "", 1), `needs "findings"`},
		{"findings in format 1", strings.Replace(string(data), backupFormatKey, `"format":1`, 1), "needs format 2"},
		{"findings before the active tree", `{"format":2,"findings":[],"active":null}`, "must follow"},
		{"findings not last", strings.Replace(string(data), `"findings":[]`, `"findings":[],"x":1`, 1), "last key"},
		{"duplicate key", strings.Replace(string(data), `"index":0`, `"index":0,"index":1`, 1), "duplicate key"},
		{"trailing data", string(data) + "{}", "trailing data"},
		{"finding with an unknown field", withFinding(strings.Replace(string(rec), `{`, `{"x":1,`, 1)), "unknown field"},
		{"finding without uid", withFinding(strings.Replace(string(rec), `"uid":"a-00001"`, `"uid":""`, 1)), "finding 0"},
		{"finding without state", withFinding(strings.Replace(string(rec), `"state":"Unassigned"`, `"state":""`, 1)), "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBackup(strings.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if !errors.Is(err, ErrInvalidBackup) {
				t.Fatalf("err %v is not ErrInvalidBackup", err)
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
	var kept []Finding
	for n := range 5 {
		f := testFinding([]string{"a", "b"}[n%2], n, int64(n))
		if n == 1 {
			f.Password = "enc:v1:sealed"
		}
		kept = append(kept, f)
	}
	if _, err := leader.InsertFindings(ctx, kept); err != nil {
		t.Fatal(err)
	}
	state := "Triaged"
	if err := leader.PatchFinding(ctx, nil, PatchFinding{Tenant: "a", UID: kept[0].UID, State: &state, Now: time.UnixMilli(99)}); err != nil {
		t.Fatal(err)
	}
	kept[0].State, kept[0].UpdatedMS = state, 99
	b, file := backupOf(t, leader)
	if !reflect.DeepEqual(sortedByUID(b.Findings), sortedByUID(kept)) {
		t.Fatalf("backup findings %+v", b.Findings)
	}
	if !bytes.Contains(file, []byte(`"password":"enc:v1:sealed"`)) {
		t.Fatalf("the stored password is not in the backup as stored: %s", file)
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("later")); err != nil {
		t.Fatal(err)
	}
	if err := leader.DeleteDraft(ctx, nil, draftID, "alice"); err != nil {
		t.Fatal(err)
	}
	later := testFinding("c", 9, 9)
	if _, err := leader.InsertFindings(ctx, []Finding{later}); err != nil {
		t.Fatal(err)
	}
	if err := leader.PatchFinding(ctx, nil, PatchFinding{Tenant: "b", UID: kept[1].UID, State: &state, Now: time.UnixMilli(100)}); err != nil {
		t.Fatal(err)
	}
	restored, err := leader.RestoreFrom(ctx, bytes.NewReader(file))
	if err != nil || restored.Findings != len(kept) || restored.Duplicates != 0 {
		t.Fatalf("restore: %+v %v", restored, err)
	}
	waitFor(t, 5*time.Second, func() bool { return follower.Index() == leader.Index() }, "the follower to apply the restore")
	tree, ai := follower.Active()
	equalTrees(t, tree, mustTree(t, richTree))
	if ai != restored.Index {
		t.Fatalf("active index %d, restore %d", ai, restored.Index)
	}
	if d, err := follower.Draft(); err != nil || d.ID != draftID || d.Owner != "alice" {
		t.Fatalf("restored draft %+v %v", d, err)
	}
	// Exactly the backup's findings: the later one is gone, the later
	// patch undone.
	fb, _ := backupOf(t, follower)
	if !reflect.DeepEqual(sortedByUID(fb.Findings), sortedByUID(kept)) {
		t.Fatalf("findings after restore %+v", fb.Findings)
	}
	if _, err := follower.Finding("c", later.UID); !errors.Is(err, ErrNoFinding) {
		t.Fatalf("a finding inserted after the backup survived the restore: %v", err)
	}
	if p, err := follower.Findings("b", FindingQuery{Limit: 10}); err != nil || p.Total != 2 {
		t.Fatalf("tenant b after restore: %+v %v", p, err)
	}

	// A format 1 backup (before findings) restores the trees and leaves
	// the findings alone.
	v1 := dropKey(t, dropKey(t, file, "audit"), "ids")
	v1 = bytes.Replace(v1[:bytes.Index(v1, []byte(`,"findings":`))], []byte(backupFormatKey), []byte(`"format":1`), 1)
	v1 = append(v1, '}')
	if _, err := leader.InsertFindings(ctx, []Finding{later}); err != nil {
		t.Fatal(err)
	}
	if r, err := leader.RestoreFrom(ctx, bytes.NewReader(v1)); err != nil || r.Findings != 0 {
		t.Fatalf("format 1 restore: %+v %v", r, err)
	}
	if _, err := leader.Finding("c", later.UID); err != nil {
		t.Fatalf("a format 1 restore dropped findings: %v", err)
	}

	// A bad file changes nothing, even when its fault is past the findings.
	idx = leader.Index()
	end := bytes.LastIndex(file, []byte(`]}`))
	bad := append(append(bytes.Clone(file[:end]), `],"x":1}`...), file[end+2:]...)
	if _, err := leader.RestoreFrom(ctx, bytes.NewReader(bad)); !errors.Is(err, ErrInvalidBackup) {
		t.Fatalf("bad restore: %v", err)
	}
	if leader.Index() != idx {
		t.Fatalf("a refused restore changed the state: %d -> %d", idx, leader.Index())
	}
	if _, err := follower.Restore(ctx, b); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("restore on a follower: %v", err)
	}
	if _, err := follower.RestoreFrom(ctx, bytes.NewReader(file)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("restore on a follower: %v", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(leader.cfg.DataDir, "restore-upload-*")); len(ents) != 0 {
		t.Fatalf("restore left %v", ents)
	}
}

func sortedByUID(fs []Finding) []Finding {
	out := slices.Clone(fs)
	slices.SortFunc(out, func(a, b Finding) int { return strings.Compare(a.UID, b.UID) })
	return out
}
