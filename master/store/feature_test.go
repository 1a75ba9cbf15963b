package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/config"
)

func TestMemberExt(t *testing.T) {
	for _, tc := range []struct {
		ext  []byte
		want int
	}{
		{nil, 0},
		{encodeMemberExt(0, nil), 0},
		{encodeMemberExt(1, nil), 1},
		{encodeMemberExt(7, nil), 7},
		{[]byte(`{"feature_level":2,"later":"field"}`), 2},
		{[]byte(`{"feature_level":-1}`), 0},
		{[]byte("not json"), 0},
	} {
		if got, _ := decodeMemberExt(tc.ext); got != tc.want {
			t.Errorf("decodeMemberExt(%q) = %d, want %d", tc.ext, got, tc.want)
		}
	}
}

// TestFSM_MemberLevels: a SetMember entry's extension records the level; one
// without (a master without levels registered it) reads as 0; the levels
// survive a reopen and go with DeleteMember.
func TestFSM_MemberLevels(t *testing.T) {
	f := newTestFSM(t)
	apply := func(idx uint64, cmd SetMember) {
		t.Helper()
		data, err := encodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		l := &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data, Extensions: encodeMemberExt(cmd.FeatureLevel, nil)}
		if r := f.ApplyBatch([]*raft.Log{l})[0].(Result); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	apply(1, SetMember{ID: "n1", HTTPAddr: "h:1", FeatureLevel: 1})
	apply(2, SetMember{ID: "n2", HTTPAddr: "h:2"})
	if a, b := f.levels().get("n1"), f.levels().get("n2"); a != 1 || b != 0 {
		t.Fatalf("levels n1 %d n2 %d, want 1 and 0", a, b)
	}
	f = reopenFSM(t, f)
	if got := f.levels().get("n1"); got != 1 {
		t.Fatalf("after reopen: n1 at level %d, want 1", got)
	}
	// Registered again by a binary without levels: back to 0.
	apply(3, SetMember{ID: "n1", HTTPAddr: "h:1"})
	if got := f.levels().get("n1"); got != 0 {
		t.Fatalf("n1 at level %d after a registration without level", got)
	}
	apply(4, SetMember{ID: "n2", HTTPAddr: "h:2", FeatureLevel: 1})
	fsmApply(t, f, 5, DeleteMember{ID: "n2"})
	if got := f.levels().get("n2"); got != 0 {
		t.Fatalf("deleted member at level %d", got)
	}
}

// TestFSM_LevelBelowEntries: a state machine of level 0 (a binary without
// levels) ignores the levels members advertise and refuses, by panicking
// as such a binary does, an entry of a level-1 form.
func TestFSM_LevelBelowEntries(t *testing.T) {
	f := newTestFSM(t)
	f.level = 0
	data, err := encodeCommand(SetMember{ID: "n1", HTTPAddr: "h:1"})
	if err != nil {
		t.Fatal(err)
	}
	l := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data, Extensions: encodeMemberExt(1, nil)}
	if r := f.ApplyBatch([]*raft.Log{l})[0].(Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := f.levels().get("n1"); got != 0 {
		t.Fatalf("n1 at level %d, want 0 (not read)", got)
	}
	fsmApply(t, f, 2, CreateDraft{ID: "d1", Owner: "alice", Now: time.UnixMilli(1)})
	mustPanicForLevel(t, LevelSessions, "applying a session entry at level 0", func() {
		fsmApply(t, f, 3, wrapped(session("k", ""), time.UnixMilli(2), TakeOver{ID: "d1", User: "bob"}))
	})
}

// entryForms returns the type and version bytes of the command entries
// of s's raft log after index from.
func entryForms(t *testing.T, s *Store, from uint64) [][2]byte {
	t.Helper()
	last, err := s.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var forms [][2]byte
	for i := from + 1; i <= last; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		if l.Type == raft.LogCommand && len(l.Data) >= 2 {
			forms = append(forms, [2]byte{l.Data[0], l.Data[1]})
		}
	}
	return forms
}

// asBinaryWithoutLevels makes s, before it opens, behave as a binary
// without feature levels: it advertises level 0, panics on the entry
// forms of level 1 and ignores the levels the members advertise.
func asBinaryWithoutLevels(s *Store) { s.level = 0 }

// TestFeatureGate_RollingUpgrade: in a cluster where one member runs a
// binary without feature levels (simulated: it panics on the entry forms
// of level 1, as that binary does), the leader writes the old forms and
// that member keeps applying every entry; once it runs the new binary and
// registers its level, the new forms are written.
func TestFeatureGate_RollingUpgrade(t *testing.T) {
	const old = 2
	nodes := newCluster(t, 3, nil, func(i int, s *Store) {
		if i == old {
			asBinaryWithoutLevels(s)
		}
	})
	waitFor(t, 10*time.Second, func() bool { return leaderOf(t, nodes).ClusterFeatureLevel() == 0 }, "the cluster at level 0")

	ms := time.Now().UnixMilli()
	n := 0
	// writes submits a request-id write and a findings insert, and
	// returns the forms of the entries written.
	writes := func(nodes []*Store) [][2]byte {
		t.Helper()
		from, err := nodes[0].logs.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		err = onLeader(t, nodes, func(ctx context.Context, l *Store) error {
			id, err := l.CreateDraft(ctx, "alice")
			if err != nil {
				return err
			}
			edit := EditDraft{ID: id, User: "alice", Tree: treeWith("x"), Now: time.Now()}
			if _, err := l.Apply(ctx, session(fmt.Sprint("edit", n), "body"), edit); err != nil {
				return err
			}
			n++
			_, err = l.InsertFindings(ctx, []Finding{testFinding("t", n, ms)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitConverged(t, nodes)
		return entryForms(t, nodes[0], from)
	}
	has := func(forms [][2]byte, typ cmdType, version byte) bool {
		for _, f := range forms {
			if f == [2]byte{byte(typ), version} {
				return true
			}
		}
		return false
	}

	forms := writes(nodes)
	if has(forms, typeSession, payloadVersion) || has(forms, typeInsertFindings, insertFindingsBinaryVersion) {
		t.Fatalf("level 0 cluster wrote forms of level 1: %v", forms)
	}
	if !has(forms, typeEditDraft, payloadVersion) || !has(forms, typeInsertFindings, payloadVersion) {
		t.Fatalf("entries %v: want an unwrapped edit and a JSON insert", forms)
	}
	for _, s := range nodes {
		if got := s.MemberLevel(nodes[old].ID()); got != 0 {
			t.Fatalf("%s records level %d for the old member", s.ID(), got)
		}
	}

	// The old member is upgraded: restarted with the new binary on its
	// address, it registers its level (as the master does when its
	// record's level is not its binary's).
	nodes[old] = reopen(t, nodes[old])
	// The members register again, as the masters do after a change of
	// leader: a leader that was the old member has no levels in its
	// state (its old binary ignored them).
	registerLevels(t, nodes)
	waitConverged(t, nodes)
	if got := leaderOf(t, nodes).ClusterFeatureLevel(); got != FeatureLevel {
		t.Fatalf("cluster level %d on the leader after the upgrade, want %d", got, FeatureLevel)
	}
	// The extensions replicate: every node records the level the
	// upgraded member registered.
	for _, s := range nodes {
		if got := s.MemberLevel(nodes[old].ID()); got != FeatureLevel {
			t.Fatalf("%s records level %d for the upgraded member", s.ID(), got)
		}
	}
	forms = writes(nodes)
	if !has(forms, typeSession, payloadVersion) || !has(forms, typeInsertFindings, insertFindingsBinaryVersion) {
		t.Fatalf("upgraded cluster: entries %v, want a session entry and a binary insert", forms)
	}
}

// BenchmarkClusterFeatureLevel is the leader's cost of the gate per
// command (a cache hit).
func BenchmarkClusterFeatureLevel(b *testing.B) {
	s := openReady(b, "node0")
	b.ReportAllocs()
	for b.Loop() {
		if s.ClusterFeatureLevel() != FeatureLevel {
			b.Fatal("level")
		}
	}
}

func TestWrittenExt(t *testing.T) {
	for _, tc := range []struct {
		ext   []byte
		level int
		ok    bool
	}{
		{nil, 0, true},
		{encodeWrittenExt(0, nil), 0, true},
		{encodeWrittenExt(FeatureLevel, nil), FeatureLevel, true},
		{[]byte(`{"written_level":1,"later":"field"}`), 1, true},
		{[]byte(`{"later":"field"}`), 0, true},
		{encodeWrittenExt(FeatureLevel+1, nil), 0, false},
		{[]byte(`{"written_level":-1}`), 0, false},
		{[]byte("not json"), 0, false},
	} {
		level, _, ok := decodeWrittenExt(tc.ext)
		if level != tc.level || ok != tc.ok {
			t.Errorf("decodeWrittenExt(%q) = %d, %v; want %d, %v", tc.ext, level, ok, tc.level, tc.ok)
		}
	}
	for level := 0; level <= FeatureLevel; level++ {
		if err := config.ValidateRules(config.NewRoot(), treeRules(level)); err != nil {
			t.Errorf("level %d: rules %d: %v", level, treeRules(level), err)
		}
		if level > 0 && treeRules(level) < treeRules(level-1) {
			t.Errorf("level %d has older rules (%d) than level %d (%d)", level, treeRules(level), level-1, treeRules(level-1))
		}
	}
}

// TestFSM_WrittenLevelAboveBinaryPanics: an entry whose trees were
// accepted under a level this binary does not know is not applied with
// other rules: the node stops, as on an entry form it cannot read, and
// the state is unchanged.
func TestFSM_WrittenLevelAboveBinaryPanics(t *testing.T) {
	f := newTestFSM(t)
	fsmApply(t, f, 1, ReplaceActive{Tree: treeWith("a")})
	data, err := encodeCommand(ReplaceActive{Tree: treeWith("b")})
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range [][]byte{encodeWrittenExt(FeatureLevel+1, nil), []byte("not json")} {
		func() {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), "validation rules") {
					t.Fatalf("extension %q: recovered %v, want a panic naming the validation rules", ext, p)
				}
			}()
			f.ApplyBatch([]*raft.Log{{Index: 2, Term: 1, Type: raft.LogCommand, Data: data, Extensions: ext}})
		}()
		if got := childNames(f.st.active); len(got) != 1 || got[0] != "a" {
			t.Fatalf("state changed: %v", got)
		}
	}
}

// TestStore_treeEntriesRecordLevel: the leader writes, on the entries
// that carry a tree or take a draft over (alone, in a batch, or in a
// session entry), the cluster's level; below LevelAudit (from which every
// entry carries its audit context: TestStore_AuditLog), other entries
// carry no extension.
func TestStore_treeEntriesRecordLevel(t *testing.T) {
	nodes := newCluster(t, 1, nil, func(_ int, s *Store) { s.level = LevelVersions })
	s := nodes[0]
	if got := s.ClusterFeatureLevel(); got != LevelVersions {
		t.Fatalf("cluster level %d, want %d", got, LevelVersions)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	from, err := s.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceActive(ctx, treeWith("a")); err != nil {
		t.Fatal(err)
	}
	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, session("edit", "body"), EditDraft{ID: id, User: "alice", Tree: treeWith("b"), Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch(ctx, TakeOver{ID: id, User: "bob"}, ReplaceActive{Tree: treeWith("c")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch(ctx, TakeOver{ID: id, User: "carol"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch(ctx, Deploy{ID: id, User: "carol"}); err != nil {
		t.Fatal(err)
	}
	last, err := s.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	want := string(encodeWrittenExt(LevelVersions, nil))
	var got []string
	for i := from + 1; i <= last; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		ext := "-"
		if len(l.Extensions) > 0 {
			ext = string(l.Extensions)
		}
		got = append(got, cmdType(l.Data[0]).String()+" "+ext)
	}
	wantAll := []string{"replace_active " + want, "create_draft -", "session " + want, "batch " + want, "batch " + want, "batch -"}
	if strings.Join(got, "\n") != strings.Join(wantAll, "\n") {
		t.Fatalf("entries and extensions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAll, "\n"))
	}
}

// TestFSM_TakeOverDisplaced: from LevelDisplaced on, a takeover records
// the owner it displaces, and a user who takes the draft over again is no
// longer displaced; the list survives a reopen and goes with the draft
// when another draft is created. Written under a lower level (a cluster
// that still has a master before it), a takeover records nobody, as that
// master applies it.
func TestFSM_TakeOverDisplaced(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1)
	at := func(level int, cmd Command) {
		t.Helper()
		if r := fsmApplyAt(t, f, f.appliedIndex()+1, level, cmd); r.Err != nil {
			t.Fatalf("%T: %v", cmd, r.Err)
		}
	}
	displaced := func(want ...string) {
		t.Helper()
		if got := f.st.draft.Displaced; !slices.Equal(got, want) {
			t.Fatalf("displaced %q, want %q", got, want)
		}
	}
	at(LevelDisplaced, CreateDraft{ID: "d1", Owner: "alice", Now: now})
	at(LevelDisplaced-1, TakeOver{ID: "d1", User: "bob"})
	displaced()
	at(LevelDisplaced, TakeOver{ID: "d1", User: "carol"})
	displaced("bob")
	at(LevelDisplaced, TakeOver{ID: "d1", User: "alice"})
	displaced("bob", "carol")
	at(LevelDisplaced, TakeOver{ID: "d1", User: "alice"}) // its own: nothing changes
	displaced("bob", "carol")
	at(LevelDisplaced, TakeOver{ID: "d1", User: "bob"})
	displaced("carol", "alice")
	at(LevelDisplaced, EditDraft{ID: "d1", User: "bob", Tree: treeWith("x"), Now: now})
	displaced("carol", "alice")
	f = reopenFSM(t, f)
	displaced("carol", "alice")
	at(LevelDisplaced, CreateDraft{ID: "d2", Owner: "alice", Now: now})
	displaced()
}
