package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// session returns a session with key and a body digest of body.
func session(key, body string) *Session {
	return &Session{Key: sha256.Sum256([]byte(key)), Fingerprint: sha256.Sum256([]byte(body))}
}

// wrapped is cmd wrapped with s, stamped at now.
func wrapped(s *Session, now time.Time, cmd Command) Command {
	return sessionCmd{s: fresh(s), now: now, cmd: cmd}
}

// fresh is an unused copy of s (a Session wraps one command).
func fresh(s *Session) *Session {
	return &Session{Key: s.Key, Fingerprint: s.Fingerprint, status: s.status, answer: s.answer}
}

func draftNames(t *testing.T, f *fsm) []string {
	t.Helper()
	d, err := f.draft()
	if err != nil {
		t.Fatal(err)
	}
	return childNames(d.Tree)
}

func TestSession_AppliedOnce(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1_700_000_000_000)
	fsmApply(t, f, 1, CreateDraft{ID: "d1", Owner: "alice", Now: now})
	edit := func(names ...string) Command {
		return EditDraft{ID: "d1", User: "alice", Tree: treeWith(names...), Now: now}
	}
	s := session("request 1", "body x")

	r := fsmApply(t, f, 2, wrapped(s, now, edit("x")))
	if r.Err != nil || r.Replayed || r.Index != 2 {
		t.Fatalf("first apply: %+v", r)
	}
	// Another client's write follows, then the first request is resent.
	fsmApply(t, f, 3, edit("y"))
	r = fsmApply(t, f, 4, wrapped(s, now.Add(time.Second), edit("x")))
	if r.Err != nil || !r.Replayed {
		t.Fatalf("resend: %+v, want replayed", r)
	}
	if got := draftNames(t, f); len(got) != 1 || got[0] != "y" {
		t.Fatalf("draft %v: the resend undid the later write", got)
	}
	if idx, _ := f.indexes(); idx != 3 {
		t.Fatalf("state index %d, want 3 (the resend changed nothing)", idx)
	}

	// The same key with another body is refused and changes nothing.
	r = fsmApply(t, f, 5, wrapped(session("request 1", "body z"), now, edit("z")))
	if !errors.Is(r.Err, ErrRequestMismatch) {
		t.Fatalf("another body: %+v, want ErrRequestMismatch", r)
	}

	// A refused command is not remembered: sent again once it can apply,
	// it applies.
	p := session("patch", "p")
	ticket := "T-1"
	patch := PatchFinding{Tenant: "t", UID: "u1", Ticket: &ticket, Now: now}
	if r := fsmApply(t, f, 6, wrapped(p, now, patch)); !errors.Is(r.Err, ErrNoFinding) {
		t.Fatalf("patch of a missing finding: %+v", r)
	}
	fsmApply(t, f, 7, InsertFindings{Findings: []Finding{sessionFinding("t", "u1")}})
	if r := fsmApply(t, f, 8, wrapped(p, now, patch)); r.Err != nil || r.Replayed {
		t.Fatalf("patch resent after the insert: %+v, want applied", r)
	}
	if r := fsmApply(t, f, 9, wrapped(p, now, patch)); r.Err != nil || !r.Replayed {
		t.Fatalf("patch sent a third time: %+v, want replayed", r)
	}
}

// sessionFinding is a valid finding of tenant with uid.
func sessionFinding(tenant, uid string) Finding {
	return Finding{UID: uid, Tenant: tenant, DiscoveredMS: 1, UpdatedMS: 1, MonitoredDomainID: 1,
		ToolCode: "tool", ResourceURL: "https://example.com/" + uid, Username: "user-" + uid, Password: "pw", State: "open"}
}

func TestSession_AnswerAndSnapshot(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1_700_000_000_000)
	s := session("create", "")
	s.SetAnswer(200, []byte(`{"id":"d1"}`))
	fsmApply(t, f, 1, wrapped(s, now, CreateDraft{ID: "d1", Owner: "alice", Now: now}))

	// The table travels in snapshots; a state without it (an older
	// snapshot) restores as an empty table.
	old := newTestFSM(t)
	empty := snapshotOf(t, old)
	data := snapshotOf(t, f)
	g := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(empty))); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(t, g, s.Key); ok {
		t.Fatal("an empty state has a session")
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	out, ok := lookup(t, g, s.Key)
	if !ok || out.Index != 1 || out.Status != 200 || string(out.Answer) != `{"id":"d1"}` || out.AtMS != now.UnixMilli() || out.Fingerprint != s.Fingerprint {
		t.Fatalf("restored outcome %+v %v", out, ok)
	}
	r := fsmApply(t, g, 2, wrapped(s, now, CreateDraft{ID: "d2", Owner: "alice", Now: now}))
	if !r.Replayed {
		t.Fatalf("resend after restore: %+v, want replayed", r)
	}
	if d, _ := g.draft(); d.ID != "d1" {
		t.Fatalf("draft %s, want d1", d.ID)
	}
}

// lookup reads the table of f.
func lookup(t *testing.T, f *fsm, key [SessionKeySize]byte) (SessionOutcome, bool) {
	t.Helper()
	var st Store
	st.fsm.Store(f)
	out, ok, err := st.Session(key)
	if err != nil {
		t.Fatal(err)
	}
	return out, ok
}

func TestSession_Bounds(t *testing.T) {
	f := newTestFSM(t)
	f.maxSessions = 3
	t0 := time.UnixMilli(1_700_000_000_000)
	fsmApply(t, f, 1, CreateDraft{ID: "d1", Owner: "alice", Now: t0})
	takeOver := TakeOver{ID: "d1", User: "bob"}
	idx := uint64(2)
	apply := func(key string, at time.Time) Result {
		t.Helper()
		r := fsmApply(t, f, idx, wrapped(session(key, ""), at, takeOver))
		idx++
		return r
	}
	count := func() int {
		t.Helper()
		n := 0
		if err := f.view(func(tx *bolt.Tx) error {
			n = tx.Bucket(bucketSessions).Stats().KeyN
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if m := f.sessions.Load().len(); m != n {
			t.Fatalf("index of %d keys, table of %d", m, n)
		}
		return n
	}

	// Expiry by the commands' own time.
	apply("a", t0)
	if r := apply("a", t0.Add(SessionWindow-time.Millisecond)); !r.Replayed {
		t.Fatal("a resend within the window applied again")
	}
	if r := apply("b", t0.Add(SessionWindow+time.Millisecond)); r.Replayed {
		t.Fatal("a new key replayed")
	}
	if count() != 1 {
		t.Fatalf("count %d, want 1: a expired", count())
	}
	if r := apply("a", t0.Add(SessionWindow+time.Second)); r.Replayed {
		t.Fatal("an expired key replayed")
	}

	// The cap evicts the oldest.
	t1 := t0.Add(SessionWindow + 2*time.Second)
	apply("c", t1)
	apply("d", t1.Add(time.Millisecond))
	if count() != 3 {
		t.Fatalf("count %d, want 3", count())
	}
	if r := apply("b", t1.Add(2*time.Millisecond)); r.Replayed {
		t.Fatal("the oldest key survived the cap")
	}
	for _, k := range []string{"c", "d", "b"} {
		if _, ok := lookup(t, f, session(k, "").Key); !ok {
			t.Fatalf("%s evicted", k)
		}
	}
	if _, ok := lookup(t, f, session("a", "").Key); ok {
		t.Fatal("a kept beyond the cap")
	}
	if count() != 3 {
		t.Fatalf("count %d, want 3", count())
	}
}

func TestSession_Cluster(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	s := session("edit", "body")
	var first, again Result
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		if _, err := l.CreateDraft(ctx, "alice"); err != nil {
			return err
		}
		d, err := l.Draft()
		if err != nil {
			return err
		}
		edit := EditDraft{ID: d.ID, User: "alice", Tree: treeWith("x"), Now: time.Now()}
		first, err = l.Apply(ctx, s, edit)
		if err != nil {
			return err
		}
		again, err = l.Apply(ctx, fresh(s), edit)
		if err != nil {
			return err
		}
		// A session wraps one command, of a client's write only.
		if _, err := l.Apply(ctx, s, edit); !errors.Is(err, ErrInvalidCommand) {
			return fmt.Errorf("a session used twice: %v, want ErrInvalidCommand", err)
		}
		insert := InsertFindings{Findings: []Finding{sessionFinding("t", "u1")}}
		if _, err := l.Apply(ctx, session("insert", ""), insert); !errors.Is(err, ErrInvalidCommand) {
			return fmt.Errorf("a session with an insert: %v, want ErrInvalidCommand", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || first.Err != nil || !again.Replayed || again.Err != nil || again.Index != first.Index {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	waitConverged(t, nodes)
	for _, n := range nodes {
		out, ok, err := n.Session(s.Key)
		if err != nil || !ok || out.Index != first.Index {
			t.Fatalf("%s: outcome %+v %v %v, want index %d", n.ID(), out, ok, err, first.Index)
		}
		if n.Index() != first.Index {
			t.Fatalf("%s: state index %d, want %d", n.ID(), n.Index(), first.Index)
		}
	}
}

// TestSession_DecodersAgree: a session entry decodes alike with
// segmentio's decoder (decodeSession) and encoding/json, and unknown
// fields are refused.
func TestSession_DecodersAgree(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := session("k", "b")
	s.SetAnswer(200, []byte("{\"id\":\"d1\"}\n"))
	data, err := encodeCommand(wrapped(s, now, CreateDraft{ID: "d1", Owner: "alice", Now: now}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	var want sessionPayload
	if err := strictUnmarshal(data[2:], &want); err != nil {
		t.Fatal(err)
	}
	got := d.p.(*sessionPayload)
	if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Fingerprint, want.Fingerprint) || got.NowMS != want.NowMS ||
		got.Status != want.Status || !bytes.Equal(got.Answer, want.Answer) || got.Command.Type != want.Command.Type ||
		!bytes.Equal(got.Command.Payload, want.Command.Payload) || string(got.Answer) != "{\"id\":\"d1\"}\n" {
		t.Fatalf("decoded %+v, encoding/json %+v", got, want)
	}
	if inner := d.batch[0].p.(*createDraftPayload); inner.ID != "d1" || inner.Owner != "alice" {
		t.Fatalf("inner %+v", inner)
	}
	bad := append([]byte{byte(typeSession), payloadVersion}, []byte(`{"key":"","fp":"","now_ms":1,"extra":1,"command":{"type":2,"version":1,"payload":{}}}`)...)
	if _, err := decodeCommand(bad); !errors.Is(err, errCorruptEntry) {
		t.Fatalf("unknown field: %v, want errCorruptEntry", err)
	}
}
