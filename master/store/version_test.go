package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
)

// deployTree makes tree the active tree through a draft of user, with a
// deploy carrying message.
func deployTree(t *testing.T, s *Store, user string, tree *config.Node, message string) uint64 {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	id, err := s.CreateDraft(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EditDraft(ctx, id, user, tree); err != nil {
		t.Fatal(err)
	}
	idx, err := s.DeployVersion(ctx, nil, id, user, nil, message)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDraft(ctx, nil, id, user); err != nil {
		t.Fatal(err)
	}
	return idx
}

func versionNumbers(vs []Version) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.Number)
	}
	return out
}

// TestStore_Versions: each deploy records a version (number, index,
// author, leader's time, message, hash of the stored tree, counts); the
// oldest beyond KeepVersions are pruned with the trees no version keeps;
// a rollback is refused while a draft exists unless forced, deploys the
// version's tree as a new version, and everything survives a reopen.
func TestStore_Versions(t *testing.T) {
	cfg := testConfig(t, "node0")
	cfg.Bootstrap = true
	cfg.KeepVersions = 3
	at := time.UnixMilli(1_700_000_000_000)
	s := openStore(t, cfg, clockAt(at))
	waitReady(t, s)
	ctx := ctxTimeout(t, 20*time.Second)

	idx1 := deployTree(t, s, "alice", treeWith("a"), "first")
	vs := s.Versions()
	if len(vs) != 1 {
		t.Fatalf("versions %+v, want 1", vs)
	}
	v1 := vs[0]
	_, raw, err := s.Version(1)
	if err != nil {
		t.Fatal(err)
	}
	_, activeIdx := s.Active()
	if v1.Number != 1 || v1.Index != idx1 || v1.Index != activeIdx || v1.Author != "alice" || v1.TimeMS != at.UnixMilli() ||
		v1.Message != "first" || v1.Nodes != 2 || v1.Rules != 0 || v1.Hash != treeHash(raw) {
		t.Fatalf("version 1 = %+v (deploy index %d)", v1, idx1)
	}
	if h, err := TreeHash(treeWith("a")); err != nil || h != v1.Hash {
		t.Fatalf("TreeHash = %s, %v; want %s", h, err, v1.Hash)
	}

	deployTree(t, s, "bob", treeWith("b"), "")
	deployTree(t, s, "alice", treeWith("a"), "again") // the tree of version 1
	deployTree(t, s, "carol", treeWith("c"), "")
	if got := versionNumbers(s.Versions()); !slices.Equal(got, []uint64{4, 3, 2}) {
		t.Fatalf("versions %v, want 4 3 2 (newest first, 1 pruned)", got)
	}
	if _, _, err := s.Version(1); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("pruned version 1: %v, want ErrNoVersion", err)
	}
	// Version 3 shares version 1's tree, which pruning 1 kept.
	if v3, _, err := s.Version(3); err != nil || v3.Hash != v1.Hash {
		t.Fatalf("version 3: %+v, %v", v3, err)
	}

	// A rollback while a draft exists is refused and changes nothing.
	draftID, err := s.CreateDraft(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	before := s.Index()
	res, err := s.RollbackTo(ctx, nil, Rollback{Version: 2, User: "erin"})
	var de *DraftExistsError
	if err != nil || !errors.As(res.Err, &de) || de.Owner != "dave" || s.Index() != before {
		t.Fatalf("rollback with a draft: %+v, %v", res, err)
	}
	res, err = s.RollbackTo(ctx, nil, Rollback{Version: 1, User: "erin", Force: true})
	if err != nil || !errors.Is(res.Err, ErrNoVersion) {
		t.Fatalf("rollback to a pruned version: %+v, %v", res, err)
	}
	res, err = s.RollbackTo(ctx, nil, Rollback{Version: 2, User: "erin", Force: true, Message: "back to b"})
	if err != nil || res.Err != nil {
		t.Fatalf("forced rollback: %+v, %v", res, err)
	}
	active, _ := s.Active()
	if got := childNames(active); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("active after rollback: %v", got)
	}
	if _, err := s.Draft(); err != nil {
		t.Fatalf("the draft is kept by a forced rollback: %v", err)
	}
	v5 := s.Versions()[0]
	if v5.Number != 5 || v5.RollbackOf != 2 || v5.Author != "erin" || v5.Message != "back to b" || v5.Index != res.Index {
		t.Fatalf("rollback version %+v", v5)
	}
	if err := s.DeleteDraft(ctx, nil, draftID, "dave"); err != nil {
		t.Fatal(err)
	}

	// A message over the bound is refused before anything is submitted.
	if _, err := s.DeployVersion(ctx, nil, "x", "alice", nil, string(bytes.Repeat([]byte("m"), MaxVersionMessage+1))); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("long message: %v", err)
	}

	// Reopened, the state file has the same versions and trees.
	want := s.Versions()
	cfg.BindAddr, cfg.Registerer, cfg.Bootstrap = s.Addr(), prometheus.NewRegistry(), false
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, cfg)
	waitReady(t, s2)
	if got := s2.Versions(); !slices.EqualFunc(got, want, func(a, b Version) bool { return a.Number == b.Number && a.Hash == b.Hash }) {
		t.Fatalf("after reopen: %+v, want %+v", got, want)
	}
	_, tree, err := s2.VersionTree(5)
	if err != nil || !config.NodeEqual(tree, treeWith("b")) {
		t.Fatalf("version 5's tree after reopen: %v", err)
	}
	// Numbers keep growing after the reopen.
	deployTree(t, s2, "alice", treeWith("d"), "")
	if got := s2.Versions()[0].Number; got != 6 {
		t.Fatalf("next version %d, want 6", got)
	}
}

// TestStore_ScopedRollback: a scoped rollback replaces only the subtree at
// its scope with the version's, keeping changes made elsewhere since; it
// is refused when the scope node's isolating fields differ, and when the
// node is missing.
func TestStore_ScopedRollback(t *testing.T) {
	s := openReady(t, "node0")
	ctx := ctxTimeout(t, 20*time.Second)

	withRule := func(team, rule string, other ...string) *config.Node {
		tr := treeWith(append([]string{team}, other...)...)
		tr.Children[0].Children = []*config.Node{{Kind: config.KindFilter, Name: rule, Active: true}}
		return tr
	}
	deployTree(t, s, "alice", withRule("team", "r1"), "")
	deployTree(t, s, "alice", withRule("team", "r2", "other"), "")
	scope := []string{"root", "team"}
	res, err := s.RollbackTo(ctx, nil, Rollback{Version: 1, User: "tina", Scope: scope})
	if err != nil || res.Err != nil {
		t.Fatalf("scoped rollback: %+v, %v", res, err)
	}
	active, _ := s.Active()
	if got := childNames(active); !slices.Equal(got, []string{"team", "other"}) {
		t.Fatalf("root children %v: the change outside the scope is kept", got)
	}
	if got := childNames(active.Children[0]); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("team children %v, want the version's r1", got)
	}
	if v := s.Versions()[0]; v.RollbackOf != 1 || !slices.Equal(v.Scope, scope) {
		t.Fatalf("scoped rollback version %+v", v)
	}

	// The scope node's filter differs in version 4: refused.
	changed := withRule("team", "r3", "other")
	changed.Children[0].Active = false
	deployTree(t, s, "alice", changed, "")
	deployTree(t, s, "alice", withRule("team", "r2", "other"), "")
	before := s.Index()
	res, err = s.RollbackTo(ctx, nil, Rollback{Version: 4, User: "tina", Scope: scope})
	if err != nil || !errors.Is(res.Err, ErrOutOfScope) || s.Index() != before {
		t.Fatalf("rollback changing the scope node: %+v, %v", res, err)
	}
	res, err = s.RollbackTo(ctx, nil, Rollback{Version: 1, User: "tina", Scope: []string{"root", "other"}})
	if err != nil || !errors.Is(res.Err, ErrNoVersionNode) || s.Index() != before {
		t.Fatalf("rollback of a node the version lacks: %+v, %v", res, err)
	}
}

// TestStore_VersionsMixedLevel: while a member advertises level 2, the
// leader writes deploys as before (no version recorded on any node), a
// rollback is refused with ErrLevel, and the level-2 member applies every
// entry; once it runs this binary, deploys record versions.
func TestStore_VersionsMixedLevel(t *testing.T) {
	const old = 2
	nodes := newCluster(t, 3, nil, func(i int, s *Store) {
		if i == old {
			s.level = LevelDisplaced
		}
	})
	waitFor(t, 10*time.Second, func() bool { return leaderOf(t, nodes).ClusterFeatureLevel() == LevelDisplaced }, "the cluster at level 2")
	from, err := nodes[0].logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	deploy := func() {
		t.Helper()
		err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
			id, err := l.CreateDraft(ctx, "alice")
			if err != nil {
				return err
			}
			_, err = l.DeployVersion(ctx, session(id, "deploy"), id, "alice", nil, "msg")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitConverged(t, nodes)
	}
	deploy()
	for _, f := range entryForms(t, nodes[0], from) {
		if f[0] >= byte(typeDeployVersion) && f[0] <= byte(typeRestoreVersions) {
			t.Fatalf("a level 2 cluster wrote a %s entry", cmdType(f[0]))
		}
	}
	for _, s := range nodes {
		if vs := s.Versions(); len(vs) != 0 {
			t.Fatalf("%s records versions %+v at level 2", s.ID(), vs)
		}
	}
	err = onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		_, err := l.RollbackTo(ctx, nil, Rollback{Version: 1, User: "alice"})
		return err
	})
	if !errors.Is(err, ErrLevel) {
		t.Fatalf("rollback at level 2: %v, want ErrLevel", err)
	}

	nodes[old] = reopen(t, nodes[old])
	registerLevels(t, nodes)
	waitConverged(t, nodes)
	deploy()
	for _, s := range nodes {
		if vs := s.Versions(); len(vs) != 1 || vs[0].Number != 1 || vs[0].Message != "msg" {
			t.Fatalf("%s: versions %+v after the upgrade, want version 1", s.ID(), vs)
		}
	}
}

// TestBackup_Versions: a backup holds the versions with their trees; a
// restore into another cluster brings them back (numbers, hashes, trees)
// and new versions follow the restored numbers; a backup of format 2
// restores and leaves the versions alone.
func TestBackup_Versions(t *testing.T) {
	src := openReady(t, "src")
	deployTree(t, src, "alice", treeWith("a"), "one")
	deployTree(t, src, "bob", treeWith("b"), "two")

	b, file := backupOf(t, src)
	if !b.WithVersions || len(b.Versions) != 2 || b.NextVersion != 3 {
		t.Fatalf("backup versions %d (with %t), next %d", len(b.Versions), b.WithVersions, b.NextVersion)
	}

	dst := openReady(t, "dst")
	deployTree(t, dst, "zoe", treeWith("z"), "")
	deployTree(t, dst, "zoe", treeWith("y"), "")
	deployTree(t, dst, "zoe", treeWith("x"), "")
	out, err := dst.RestoreFrom(ctxTimeout(t, 10*time.Second), bytes.NewReader(file))
	if err != nil || out.Versions != 2 {
		t.Fatalf("restore: %+v, %v", out, err)
	}
	want, got := src.Versions(), dst.Versions()
	if !slices.EqualFunc(got, want, func(a, b Version) bool {
		return a.Number == b.Number && a.Hash == b.Hash && a.Author == b.Author && a.Message == b.Message && a.TimeMS == b.TimeMS
	}) {
		t.Fatalf("restored versions %+v, want %+v", got, want)
	}
	if _, tree, err := dst.VersionTree(1); err != nil || !config.NodeEqual(tree, treeWith("a")) {
		t.Fatalf("restored version 1: %v", err)
	}
	// The destination had reached number 3: numbers never go back.
	deployTree(t, dst, "zoe", treeWith("w"), "")
	if n := dst.Versions()[0].Number; n != 4 {
		t.Fatalf("version after the restore is %d, want 4", n)
	}

	// A format 2 backup (no versions) leaves them alone.
	old := bytes.Replace(file, []byte(backupFormatKey), []byte(`"format":2`), 1)
	old = dropKey(t, old, "versions")
	old = dropKey(t, old, "next_version")
	old = dropKey(t, old, "audit")
	old = dropKey(t, old, "ids")
	if _, err := dst.RestoreFrom(ctxTimeout(t, 10*time.Second), bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	if n := len(dst.Versions()); n != 3 {
		t.Fatalf("format 2 restore left %d versions, want 3", n)
	}
	// A format 2 file with versions is refused.
	bad := bytes.Replace(file, []byte(backupFormatKey), []byte(`"format":2`), 1)
	if _, err := DecodeBackup(bytes.NewReader(bad)); !errors.Is(err, ErrInvalidBackup) {
		t.Fatalf("format 2 with versions: %v", err)
	}
}

// dropKey removes a top-level key of a backup file (re-encoding it,
// findings last).
func dropKey(t *testing.T, file []byte, key string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(file, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, key)
	findings := m["findings"]
	delete(m, "findings")
	head, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(append(head[:len(head)-1], `,"findings":`...), findings...), '}')
}

// BenchmarkDeployVersion2k measures a deploy of a 2,000-rule draft (one
// rule edited before each) on a 3-node cluster with fsync, recording a
// version (level 3: "versions") and as masters before versions deploy
// (level 2: "none"), with KeepVersions 200, and with rule tests attached
// (level 5: "tested": the deploy names the draft tested, TestedOf, which
// every node checks). Besides the latency of the deploy it reports the
// growth of the leader's state file per deploy. Run with -benchtime=30x.
func BenchmarkDeployVersion2k(b *testing.B) {
	for _, tc := range []struct {
		name  string
		level int
	}{{"none", LevelDisplaced}, {"versions", LevelVersions}, {"tested", LevelDraftTests}} {
		b.Run(tc.name, func(b *testing.B) {
			leader, id := largeDraftCluster(b, 2_000, func(_ int, s *Store) { s.level = tc.level })
			ctx := b.Context()
			if tc.level >= LevelDraftTests {
				if err := leader.SetDraftTests(ctx, nil, id, "alice", testFiles("a.json")); err != nil {
					b.Fatal(err)
				}
			}
			path := []string{"root", "tenant7", "rules"}
			stateFile := filepath.Join(leader.cfg.DataDir, fsmDBName)
			before := fileSize(b, stateFile)
			var lat []time.Duration
			i := 0
			start := time.Now()
			for b.Loop() {
				rule := &config.Rule{Name: "rule_50", Description: fmt.Sprintf("edit %d", i), Active: true, Continue: true}
				if err := leader.EditDraftPart(ctx, nil, id, "alice", &config.Edit{Op: config.EditUpdateRule, Path: path, RuleName: "rule_50", Rule: rule}); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if tc.level >= LevelDraftTests {
					d, err := leader.DraftView()
					if err != nil {
						b.Fatal(err)
					}
					tested, err := TestedOf(d)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := leader.DeployTested(ctx, nil, id, "alice", nil, "bench", tested); err != nil {
						b.Fatal(err)
					}
				} else if _, err := leader.DeployVersion(ctx, nil, id, "alice", nil, "bench"); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				i++
			}
			reportLatency(b, lat, time.Since(start))
			b.ReportMetric(float64(fileSize(b, stateFile)-before)/float64(i), "statefile-growth-bytes/deploy")
			if want := tc.level >= LevelVersions; (len(leader.Versions()) > 0) != want {
				b.Fatalf("%d versions recorded at level %d", len(leader.Versions()), tc.level)
			}
		})
	}
}

// TestFSM_VersionFormsBelowLevel: a state machine of level 2 refuses, by
// panicking as a binary of that level does, the version entries, also
// when a session entry wraps them.
func TestFSM_VersionFormsBelowLevel(t *testing.T) {
	f := newTestFSM(t)
	f.level = LevelDisplaced
	fsmApply(t, f, 1, CreateDraft{ID: "d1", Owner: "alice", Now: time.UnixMilli(1)})
	for i, cmd := range []Command{
		deployVersion{ID: "d1", User: "alice", Now: time.UnixMilli(2), Keep: 5},
		wrapped(session("k", ""), time.UnixMilli(2), deployVersion{ID: "d1", User: "alice", Now: time.UnixMilli(2), Keep: 5}),
		Rollback{Version: 1, User: "alice", Now: time.UnixMilli(2), Keep: 5},
	} {
		mustPanicForLevel(t, LevelVersions, fmt.Sprintf("%T at level 2", cmd), func() { fsmApply(t, f, uint64(2+i), cmd) })
	}
}
