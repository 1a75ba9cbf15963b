package store

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// backupFormatKey is the format key of the backup files this binary
// writes.
var backupFormatKey = fmt.Sprintf(`"format":%d`, BackupFormat)

// idFinding is a finding of tenant with tool, its identity n.
func idFinding(tenant, tool string, n int) Finding {
	f := testFinding(tenant, n, time.Now().UnixMilli())
	f.ToolCode = tool
	return f
}

// insertOn stores fs through the leader of nodes.
func insertOn(t *testing.T, nodes []*Store, fs ...Finding) {
	t.Helper()
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		_, err := l.InsertFindings(ctx, fs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// idsOf returns s's ids.
func idsOf(t *testing.T, s *Store) *IDs {
	t.Helper()
	ids, err := s.IDs()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// sameIDsEverywhere waits until every node has applied the leader's
// state, then checks that all hold want.
func sameIDsEverywhere(t *testing.T, nodes []*Store, want *IDs) {
	t.Helper()
	waitConverged(t, nodes)
	for _, s := range nodes {
		if got := idsOf(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s holds ids %+v, want %+v", s.ID(), got, want)
		}
	}
}

// findingsCarryIDs fails the test unless every node reads n findings of
// tenant, each with want's ids of the tenant and of its tool.
func findingsCarryIDs(t *testing.T, nodes []*Store, tenant string, n int, want *IDs) {
	t.Helper()
	for _, s := range nodes {
		p, err := s.Findings(tenant, FindingQuery{Limit: 10})
		if err != nil || len(p.Findings) != n {
			t.Fatalf("%s: %+v %v", s.ID(), p, err)
		}
		for _, f := range p.Findings {
			if f.OrgID != want.Tenants[tenant] || f.ToolID != want.Tools[f.ToolCode] {
				t.Fatalf("%s: finding %+v, want org %d and tool %d", s.ID(), f, want.Tenants[tenant], want.Tools[f.ToolCode])
			}
		}
	}
}

// ids is an IDs literal: tools then tenants, name and id pairs.
func ids(tools, tenants map[string]int64) *IDs { return &IDs{Tools: tools, Tenants: tenants} }

// TestIDs_InsertAndRead: from the first finding stored, every tool code
// and every tenant has an integer id, which reads of one finding and of
// pages answer; the same tool (whatever the tenant) and the same tenant
// keep theirs, new ones take the next, and deleting every finding keeps
// them.
func TestIDs_InsertAndRead(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, nil)
	s := nodes[0]
	if got := idsOf(t, s); got != nil {
		t.Fatalf("ids before any finding: %+v", got)
	}
	insertOn(t, nodes, idFinding("globex", "scan", 1), idFinding("acme", "leaks", 2), idFinding("acme", "scan", 3))
	want := ids(map[string]int64{"scan": 1, "leaks": 2}, map[string]int64{"globex": 1, "acme": 2})
	if got := idsOf(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("ids %+v, want %+v (in the entry's order)", got, want)
	}
	check := func(tenant string, wantOrg int64, tools map[string]int64) {
		t.Helper()
		p, err := s.Findings(tenant, FindingQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Findings {
			if f.OrgID != wantOrg || f.ToolID != tools[f.ToolCode] || f.ToolID == 0 {
				t.Fatalf("page of %s: finding %s has tool %s id %d, org id %d; want %d, %d", tenant, f.UID, f.ToolCode, f.ToolID, f.OrgID, tools[f.ToolCode], wantOrg)
			}
			one, err := s.Finding(tenant, f.UID)
			if err != nil || one != f {
				t.Fatalf("finding %s: %+v %v, want the page's %+v", f.UID, one, err, f)
			}
		}
	}
	check("acme", 2, want.Tools)
	check("globex", 1, want.Tools)
	// Filtered pages and time ranges read their ids too.
	if p, err := s.Findings("acme", FindingQuery{ToolCode: "leaks", Limit: 10}); err != nil || len(p.Findings) != 1 || p.Findings[0].ToolID != 2 || p.Findings[0].OrgID != 2 {
		t.Fatalf("filtered page %+v %v", p, err)
	}

	// A duplicate changes nothing; a new tool and a new tenant take the
	// next ids.
	insertOn(t, nodes, idFinding("acme", "leaks", 2), idFinding("initech", "leaks", 4), idFinding("acme", "paste", 5))
	want = ids(map[string]int64{"scan": 1, "leaks": 2, "paste": 3}, map[string]int64{"globex": 1, "acme": 2, "initech": 3})
	if got := idsOf(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("ids %+v, want %+v", got, want)
	}
	check("acme", 2, want.Tools)
	check("initech", 3, want.Tools)

	// Deleting every finding keeps the ids: a tenant that comes back has
	// its id again.
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		_, err := l.Apply(ctx, nil, ClearFindings{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	insertOn(t, nodes, idFinding("initech", "scan", 6))
	if got := idsOf(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("ids after clearing the findings %+v, want %+v", got, want)
	}
	check("initech", 3, want.Tools)
}

// TestIDs_EveryNode: the ids are the same on every node of a 3-node
// cluster, on a follower that catches up by installing a snapshot, and
// after the leader is stopped, the next ids coming from the same
// sequence.
func TestIDs_EveryNode(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, func(_ int, c *Config) {
		c.TrailingLogs = 2
		c.SnapshotThreshold = 16
	})
	for n := range 20 {
		insertOn(t, nodes, idFinding(fmt.Sprintf("tenant%d", n%4), fmt.Sprintf("tool%d", n%3), n))
	}
	leader := leaderOf(t, nodes)
	want := idsOf(t, leader)
	if len(want.Tools) != 3 || len(want.Tenants) != 4 {
		t.Fatalf("ids %+v", want)
	}
	sameIDsEverywhere(t, nodes, want)

	// A follower cut off while new tools and tenants come, and the log
	// compacted behind it, catches up from a snapshot.
	lag := others(nodes, leader)[0]
	partition(lag, true)
	majority := others(nodes, lag)
	for n := 20; n < 60; n++ {
		insertOn(t, majority, idFinding(fmt.Sprintf("late%d", n%5), fmt.Sprintf("newtool%d", n%7), n))
	}
	err := onLeader(t, majority, func(ctx context.Context, l *Store) error { return l.Snapshot(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	want = idsOf(t, leaderOf(t, majority))
	if len(want.Tools) != 10 || len(want.Tenants) != 9 {
		t.Fatalf("ids %+v", want)
	}
	partition(lag, false)
	sameIDsEverywhere(t, nodes, want)
	mustHaveInstalledSnapshot(t, lag)
	p, err := lag.Findings("late1", FindingQuery{Limit: 100})
	if err != nil || p.Total == 0 || p.Findings[0].OrgID != want.Tenants["late1"] || p.Findings[0].ToolID != want.Tools[p.Findings[0].ToolCode] {
		t.Fatalf("the follower's page %+v %v, want ids %+v", p, err, want)
	}

	// The leader stops; the next leader gives the next ids.
	old := leaderOf(t, nodes)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	rest := others(nodes, old)
	insertOn(t, rest, idFinding("after", "fresh", 100))
	want.Tools["fresh"], want.Tenants["after"] = 11, 10
	waitFor(t, 10*time.Second, func() bool {
		l := leaderOf(t, rest)
		return l.Index() == rest[0].Index() && l.Index() == rest[1].Index()
	}, "both nodes to apply the insert")
	for _, s := range rest {
		if got := idsOf(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after the leader stopped: ids %+v, want %+v", s.ID(), got, want)
		}
	}
}

// TestIDs_Upgrade: in a cluster where a member runs a release of the
// level before ids (simulated: it panics on AssignIDs, as that release
// does), nothing has an id and reads have 0 (the API's null); once that
// member runs this release and registers its level, the leader writes
// AssignIDs, which numbers the stored tenants, then the tool codes, in
// byte order, on every node.
func TestIDs_Upgrade(t *testing.T) {
	t.Parallel()
	const old = 2
	nodes := newCluster(t, 3, nil, func(i int, s *Store) {
		if i == old {
			s.level = LevelTypedIDs - 1
		}
	})
	waitFor(t, 10*time.Second, func() bool { return leaderOf(t, nodes).ClusterFeatureLevel() == LevelTypedIDs-1 }, "the cluster below ids")
	insertOn(t, nodes, idFinding("globex", "scan", 1), idFinding("acme", "zap", 2), idFinding("initech", "leaks", 3), idFinding("acme", "scan", 4))
	waitConverged(t, nodes)
	for _, s := range nodes {
		if got := idsOf(t, s); got != nil {
			t.Fatalf("%s has ids %+v below their level", s.ID(), got)
		}
		p, err := s.Findings("acme", FindingQuery{Limit: 10})
		if err != nil || len(p.Findings) != 2 || p.Findings[0].ToolID != 0 || p.Findings[0].OrgID != 0 {
			t.Fatalf("%s: page %+v %v, want no ids", s.ID(), p, err)
		}
	}
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		_, err := l.Apply(ctx, nil, AssignIDs{})
		return err
	})
	if err == nil {
		t.Fatal("AssignIDs written below its level")
	}

	// The old member runs this release.
	nodes[old] = reopen(t, nodes[old])
	registerLevels(t, nodes)
	want := ids(map[string]int64{"leaks": 1, "scan": 2, "zap": 3}, map[string]int64{"acme": 1, "globex": 2, "initech": 3})
	waitFor(t, 20*time.Second, func() bool {
		for _, s := range nodes {
			if got, err := s.IDs(); err != nil || !reflect.DeepEqual(got, want) {
				return false
			}
		}
		return true
	}, "every node to number the stored tools and tenants")
	findingsCarryIDs(t, nodes, "acme", 2, want)
	// New ones follow.
	insertOn(t, nodes, idFinding("hooli", "paste", 5))
	want.Tools["paste"], want.Tenants["hooli"] = 4, 4
	sameIDsEverywhere(t, nodes, want)
}

// TestIDs_BackupRestore: a backup carries the ids, and restoring it into
// a new cluster gives the same; a backup without ids (an older format)
// gives the ids the upgrade would (byte order), the same wherever it is
// restored; a restore replaces the ids the cluster had; and a cluster
// below the ids' level restores none.
func TestIDs_BackupRestore(t *testing.T) {
	t.Parallel()
	src := newCluster(t, 1, nil)[0]
	ctx := ctxTimeout(t, 30*time.Second)
	// Inserted in an order that is not the names' order.
	for n, tt := range [][2]string{{"zeta", "scan"}, {"acme", "zap"}, {"mid", "leaks"}, {"acme", "scan"}} {
		if _, err := src.InsertFindings(ctx, []Finding{idFinding(tt[0], tt[1], n)}); err != nil {
			t.Fatal(err)
		}
	}
	want := ids(map[string]int64{"scan": 1, "zap": 2, "leaks": 3}, map[string]int64{"zeta": 1, "acme": 2, "mid": 3})
	if got := idsOf(t, src); !reflect.DeepEqual(got, want) {
		t.Fatalf("source ids %+v, want %+v", got, want)
	}
	b, file := backupOf(t, src)
	if !reflect.DeepEqual(b.IDs, want) || !bytes.Contains(file, []byte(`"ids":{"tools":{"leaks":3,"scan":1,"zap":2},"tenants":{"acme":2,"mid":3,"zeta":1}}`)) {
		t.Fatalf("backup ids %+v in %s", b.IDs, file)
	}
	restore := func(s *Store, file []byte) Restored {
		t.Helper()
		r, err := s.RestoreFrom(ctx, bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Into a new 3-node cluster: the same ids on every node, and in the
	// findings read.
	dst := newCluster(t, 3, nil)
	restore(leaderOf(t, dst), file)
	sameIDsEverywhere(t, dst, want)
	findingsCarryIDs(t, dst, "acme", 2, want)
	// The restored cluster numbers on from them.
	insertOn(t, dst, idFinding("new", "fresh", 10))
	got := idsOf(t, leaderOf(t, dst))
	if got.Tools["fresh"] != 4 || got.Tenants["new"] != 4 {
		t.Fatalf("ids after the restore %+v", got)
	}
	// Restoring the file again replaces them.
	restore(leaderOf(t, dst), file)
	sameIDsEverywhere(t, dst, want)

	// A file of the format before ids: the upgrade's numbering, the same
	// in two clusters (and the one the source cluster would have had, had
	// it upgraded with these findings).
	// (dropKey writes the keys in byte order: "audit" would come before
	// "format", so the file is of format 3.)
	older := bytes.Replace(dropKey(t, dropKey(t, file, "ids"), "audit"), []byte(backupFormatKey), []byte(`"format":3`), 1)
	sorted := ids(map[string]int64{"leaks": 1, "scan": 2, "zap": 3}, map[string]int64{"acme": 1, "mid": 2, "zeta": 3})
	for range 2 {
		c := newCluster(t, 1, nil)
		restore(c[0], older)
		if got := idsOf(t, c[0]); !reflect.DeepEqual(got, sorted) {
			t.Fatalf("ids from a format 3 file %+v, want %+v", got, sorted)
		}
	}
	// In memory (Store.Restore) the same.
	ob, err := DecodeBackup(bytes.NewReader(older))
	if err != nil || ob.IDs != nil {
		t.Fatalf("format 3 file: %+v %v", ob, err)
	}
	c := newCluster(t, 1, nil)
	if _, err := c[0].Restore(ctx, ob); err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, c[0]); !reflect.DeepEqual(got, sorted) {
		t.Fatalf("ids from a format 3 backup restored in memory %+v, want %+v", got, sorted)
	}

	// A cluster below the ids' level restores the findings, not the ids.
	low := newCluster(t, 1, nil, func(_ int, s *Store) { s.level = LevelTypedIDs - 1 })
	if r := restore(low[0], file); !r.IDsSkipped || r.Findings != 4 {
		t.Fatalf("restore below the level: %+v", r)
	}
	if got := idsOf(t, low[0]); got != nil {
		t.Fatalf("ids below their level: %+v", got)
	}
}

// TestIDs_BadInput: AssignIDs and backup files with ids that repeat, are
// out of range or name nothing are refused and change nothing.
func TestIDs_BadInput(t *testing.T) {
	t.Parallel()
	for name, x := range map[string]*IDs{
		"repeated id":  ids(map[string]int64{"a": 1, "b": 1}, nil),
		"zero id":      ids(nil, map[string]int64{"a": 0}),
		"id too large": ids(nil, map[string]int64{"a": MaxID + 1}),
		"empty name":   ids(map[string]int64{"": 3}, nil),
	} {
		if _, err := (AssignIDs{Replace: true, IDs: x}).payload(); err == nil {
			t.Errorf("%s: AssignIDs accepted", name)
		}
	}
	if _, err := (AssignIDs{IDs: ids(map[string]int64{"a": 1}, nil)}).payload(); err == nil {
		t.Error("ids without replace accepted")
	}
	// Applied anyway (written by another binary), it is refused.
	f := newTestFSM(t)
	fsmInsert(t, f, 1, idFinding("acme", "scan", 1))
	data := append([]byte{byte(typeAssignIDs), payloadVersion}, `{"replace":true,"tools":{"a":1,"b":1}}`...)
	r := f.ApplyBatch([]*raft.Log{{Index: 2, Term: 1, Type: raft.LogCommand, Data: data}})[0].(Result)
	if r.Err == nil {
		t.Fatal("repeated ids applied")
	}
	if f.hasIDs() {
		t.Fatal("a refused AssignIDs turned ids on")
	}

	src := newCluster(t, 1, nil)[0]
	if _, err := src.InsertFindings(ctxTimeout(t, 10*time.Second), []Finding{idFinding("acme", "scan", 1)}); err != nil {
		t.Fatal(err)
	}
	_, file := backupOf(t, src)
	for name, bad := range map[string][]byte{
		"repeated id":     bytes.Replace(file, []byte(`"tenants":{"acme":1}`), []byte(`"tenants":{"acme":1,"b":1}`), 1),
		"ids in format 4": bytes.Replace(file, []byte(backupFormatKey), []byte(`"format":4`), 1),
	} {
		if bytes.Equal(bad, file) {
			t.Fatalf("%s: the file did not change: %s", name, file)
		}
		if _, err := DecodeBackup(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: backup accepted", name)
		}
	}
}

// TestFSM_AssignIDsBelowLevel: a master of the level before ids panics on
// the AssignIDs entry, alone or in a restore's batch, as a release of that
// level does on an entry it does not know, rather than apply inserts
// without numbering them.
func TestFSM_AssignIDsBelowLevel(t *testing.T) {
	t.Parallel()
	alone, err := encodeCommand(AssignIDs{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := encodeBatch([]Command{ClearFindings{}, AssignIDs{Replace: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"alone": alone, "in a batch": batch} {
		t.Run(name, func(t *testing.T) {
			f := newTestFSM(t)
			f.level = LevelTypedIDs - 1
			mustPanicForLevel(t, LevelTypedIDs, name, func() {
				f.ApplyBatch([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}})
			})
		})
	}
}
