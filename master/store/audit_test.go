package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/master/audit"
)

func auditActions(recs []audit.Record) []string {
	var out []string
	for _, r := range recs {
		s := r.Action + " " + r.Result
		if r.Code != "" {
			s += " " + r.Code
		}
		out = append(out, s)
	}
	return out
}

// TestStore_AuditLog: each change of the state records who (the origin
// in the context, else the command's user), what, the leader's time, the
// request id and the result, refusals included; the chain verifies, the
// oldest records beyond AuditKeep are pruned (the first kept keeps its
// prev hash), and everything survives a reopen.
func TestStore_AuditLog(t *testing.T) {
	cfg := testConfig(t, "node0")
	cfg.Bootstrap = true
	cfg.AuditKeep = 6
	at := time.UnixMilli(1_700_000_000_000)
	s := openStore(t, cfg, clockAt(at))
	waitReady(t, s)
	ctx := ContextWithOrigin(ctxTimeout(t, 20*time.Second), Origin{User: "alice", Authorization: "admin", RequestID: "req-1"})

	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EditDraft(ctx, id, "alice", treeWith("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.EditDraft(ctx, id, "alice", invalidTree()); !errors.Is(err, ErrInvalidTree) {
		t.Fatalf("edit with an invalid tree: %v", err)
	}
	if _, err := s.DeployVersion(ctx, nil, id, "alice", nil, "m"); err != nil {
		t.Fatal(err)
	}
	// No origin: the command's user is recorded.
	if err := s.TakeOver(ctxTimeout(t, 10*time.Second), nil, id, "bob"); err != nil {
		t.Fatal(err)
	}
	recs, err := s.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	// The registration of the node itself (SetMemberLevel by openStore's
	// bootstrap) may or may not precede: look at the draft's records.
	want := []string{"draft.create applied", "draft.edit applied", "draft.edit refused INVALID_TREE", "tree.deploy applied", "draft.take_over applied"}
	if got := auditActions(recs); !slices.Equal(got[len(got)-len(want):], want) {
		t.Fatalf("records %q, want them to end with %q", got, want)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	first := recs[len(recs)-len(want)]
	if first.User != "alice" || first.Authorization != "admin" || first.RequestID != "req-1" || first.TimeMS != at.UnixMilli() || first.Target != id {
		t.Fatalf("create record %+v", first)
	}
	last := recs[len(recs)-1]
	if last.User != "bob" || last.RequestID != "" || last.Target != id {
		t.Fatalf("takeover record %+v", last)
	}
	if dep := recs[len(recs)-2]; dep.Detail != "version 1" {
		t.Fatalf("deploy record %+v, want detail version 1", dep)
	}

	// Pruning: AuditKeep records stay, the first one keeps its prev.
	for range 4 {
		if err := s.TakeOver(ctx, nil, id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	recs, err = s.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != cfg.AuditKeep || recs[0].Prev == "" {
		t.Fatalf("%d records after pruning (first %+v), want %d with a prev hash", len(recs), recs[0], cfg.AuditKeep)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}

	// Paging newest first, filters.
	page, next, err := s.Audit(AuditQuery{Limit: 2})
	if err != nil || len(page) != 2 || page[0].Seq != recs[len(recs)-1].Seq || next != page[1].Seq {
		t.Fatalf("page %+v next %d: %v", page, next, err)
	}
	page2, _, err := s.Audit(AuditQuery{Limit: 2, Before: next})
	if err != nil || len(page2) != 2 || page2[0].Seq != next-1 {
		t.Fatalf("second page %+v: %v", page2, err)
	}
	bob, _, err := s.Audit(AuditQuery{Limit: 100, User: "bob"})
	if err != nil || len(bob) != 1 || bob[0].Action != "draft.take_over" {
		t.Fatalf("bob's records %+v: %v", bob, err)
	}
	none, _, err := s.Audit(AuditQuery{Limit: 100, Since: at.Add(time.Second)})
	if err != nil || len(none) != 0 {
		t.Fatalf("records since a later time %+v: %v", none, err)
	}

	// The backup holds the log.
	b, _ := backupOf(t, s)
	if !slices.Equal(b.Audit, recs) {
		t.Fatalf("backup's records differ:\n%+v\n%+v", b.Audit, recs)
	}

	// Reopen: the same records, and the chain goes on.
	path := filepath.Join(cfg.DataDir, "fsm.db")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadAuditFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fromFile, recs) {
		t.Fatalf("records read from the state file differ:\n%+v\n%+v", fromFile, recs)
	}
	cfg.Bootstrap = false
	s = openStore(t, cfg, clockAt(at))
	waitReady(t, s)
	if err := s.DeleteDraft(ctx, nil, id, "alice"); err != nil {
		t.Fatal(err)
	}
	after, err := s.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(after); err != nil || after[len(after)-1].Action != "draft.delete" {
		t.Fatalf("after reopen: %v, %+v", err, after[len(after)-1])
	}
}

// TestStore_AuditAltered: a record changed in a copy of the state file is
// named by Verify.
func TestStore_AuditAltered(t *testing.T) {
	s := openReady(t, "node0")
	ctx := ContextWithOrigin(ctxTimeout(t, 20*time.Second), Origin{User: "alice"})
	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.TakeOver(ctx, nil, id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.cfg.DataDir, "fsm.db"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ReadAuditFile(filepath.Join(s.cfg.DataDir, "fsm.db"))
	if err != nil || len(recs) < 3 {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	victim := recs[1]
	for _, tc := range []struct {
		name   string
		change func(r *audit.Record)
		want   uint64
	}{
		{"content", func(r *audit.Record) { r.User = "mallory" }, victim.Seq},
		{"content and its hash", func(r *audit.Record) { r.User = "mallory"; *r = audit.Seal(*r) }, victim.Seq + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "fsm.db")
			if err := os.WriteFile(cp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			alterAuditRecord(t, cp, victim.Seq, tc.change)
			recs, err := ReadAuditFile(cp)
			if err != nil {
				t.Fatal(err)
			}
			var be *audit.BrokenError
			if err := audit.Verify(recs); !errors.As(err, &be) || be.Seq != tc.want {
				t.Fatalf("verify: %v, want the chain broken at record %d", err, tc.want)
			}
		})
	}
}

// alterAuditRecord rewrites record seq of the state file at path.
func alterAuditRecord(t *testing.T, path string, seq uint64, change func(*audit.Record)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		var r audit.Record
		if err := json.Unmarshal(b.Get(auditKey(seq)), &r); err != nil {
			return err
		}
		change(&r)
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return b.Put(auditKey(seq), raw)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStore_AuditMixedLevels: a cluster with a member of level 3 writes no
// audit context and records nothing, on any node, and keeps working.
func TestStore_AuditMixedLevels(t *testing.T) {
	nodes := newCluster(t, 3, nil, func(i int, s *Store) {
		if i == 2 {
			s.level = LevelVersions
		}
	})
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		if lv := l.ClusterFeatureLevel(); lv != LevelVersions {
			return fmt.Errorf("cluster level %d, want %d", lv, LevelVersions)
		}
		id, err := l.CreateDraft(ctx, "alice")
		if err != nil {
			return err
		}
		_, err = l.DeployVersion(ctx, nil, id, "alice", nil, "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitConverged(t, nodes)
	for _, n := range nodes {
		if recs, err := n.AuditRecords(); err != nil || len(recs) != 0 {
			t.Fatalf("%s: records %+v at level 3: %v", n.ID(), recs, err)
		}
	}
}

// BenchmarkApplyAudit measures the state machine's apply of one TakeOver
// entry (the lightest write of a draft), written at level 3 (no audit
// context: "none") and at level 4 (an audit record per entry, with
// pruning at the default retention: "audit", into a log already holding
// 100,000 records), without raft: what every master spends per entry on
// the audit log.
func BenchmarkApplyAudit(b *testing.B) {
	for _, tc := range []struct {
		name  string
		level int
	}{{"none", LevelVersions}, {"audit", LevelAudit}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newTestFSM(b)
			idx := uint64(0)
			apply := func(cmd Command, x *auditExt) {
				data, err := encodeCommand(cmd)
				if err != nil {
					b.Fatal(err)
				}
				idx++
				l := &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data, Extensions: encodeWrittenExt(tc.level, x)}
				if r := f.ApplyBatch([]*raft.Log{l})[0].(Result); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			x := func() *auditExt {
				if tc.level < LevelAudit {
					return nil
				}
				return &auditExt{User: "alice", Auth: "all", RequestID: "0123456789abcdef0123456789abcdef", NowMS: 1_764_000_000_000, Keep: DefaultAuditKeep}
			}
			apply(CreateDraft{ID: "d", Owner: "alice", Now: time.UnixMilli(1)}, x())
			if tc.level >= LevelAudit {
				for range DefaultAuditKeep / 1000 {
					err := f.db.Update(func(tx *bolt.Tx) error {
						for range 1000 {
							d := decoded{typ: typeTakeOver, p: &draftUserPayload{ID: "d", User: "alice"}, audit: x()}
							idx++
							if err := recordAudit(tx, &f.st, idx, d, Result{Index: idx}, auditBefore{}); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				apply(TakeOver{ID: "d", User: "alice"}, x())
			}
		})
	}
}
