package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testFinding is finding n of tenant, discovered at ms.
func testFinding(tenant string, n int, ms int64) Finding {
	return Finding{
		UID: fmt.Sprintf("%s-%05d", tenant, n), Tenant: tenant, DiscoveredMS: ms, UpdatedMS: ms,
		MonitoredDomainID: int64(1 + n%3), ToolCode: []string{"leaks", "scan"}[n%2],
		ResourceURL: "https://example.com/login/", Username: fmt.Sprintf("user%d@example.com", n),
		Hash: fmt.Sprintf("%064x", n), HashAlgorithm: "SHA-256", State: "Unassigned",
	}
}

// fsmInsert applies one InsertFindings entry and returns its outcomes.
func fsmInsert(t testing.TB, f *fsm, idx uint64, fs ...Finding) []FindingOutcome {
	t.Helper()
	r := fsmApply(t, f, idx, InsertFindings{Findings: fs})
	if r.Err != nil {
		t.Fatalf("insert: %v", r.Err)
	}
	if len(r.Findings) != len(fs) {
		t.Fatalf("%d outcomes for %d findings", len(r.Findings), len(fs))
	}
	return r.Findings
}

func uids(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.UID
	}
	return out
}

func TestFSM_InsertFindings(t *testing.T) {
	f := newTestFSM(t)
	a0, a1 := testFinding("a", 0, 1000), testFinding("a", 1, 2000)
	outs := fsmInsert(t, f, 1, a0, a1)
	for i, o := range outs {
		if !o.Created || o.Err != nil || o.UID != []string{a0.UID, a1.UID}[i] {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
	if got := f.st.index; got != 1 {
		t.Fatalf("state index %d, want 1", got)
	}

	t.Run("get", func(t *testing.T) {
		got, err := f.finding("a", a1.UID)
		if err != nil || got != a1 {
			t.Fatalf("got %+v, %v; want %+v", got, err, a1)
		}
	})
	t.Run("dedupe", func(t *testing.T) {
		dup := a0
		dup.UID, dup.DiscoveredMS = "a-new", 5000
		// The same identity twice in one entry, and a new one.
		a2 := testFinding("a", 2, 3000)
		dup2 := a2
		dup2.UID = "a-new2"
		outs := fsmInsert(t, f, 2, dup, a2, dup2)
		want := []FindingOutcome{{UID: a0.UID}, {UID: a2.UID, Created: true}, {UID: a2.UID}}
		for i := range want {
			if outs[i] != want[i] {
				t.Fatalf("outcome %d: %+v, want %+v", i, outs[i], want[i])
			}
		}
		if _, err := f.finding("a", "a-new"); !errors.Is(err, ErrNoFinding) {
			t.Fatalf("duplicate stored: %v", err)
		}
		// Nothing new: the state index stays.
		before := f.st.index
		fsmInsert(t, f, 3, dup)
		if f.st.index != before {
			t.Fatalf("state index moved from %d to %d on a duplicate", before, f.st.index)
		}
	})
	t.Run("password identity", func(t *testing.T) {
		p := testFinding("a", 10, 4000)
		p.Hash, p.HashAlgorithm, p.Password = "", "", "s3cret"
		q := p
		q.UID = "other"
		r := p
		r.UID, r.Password = "third", "other secret"
		outs := fsmInsert(t, f, 4, p, q, r)
		if !outs[0].Created || outs[1].Created || outs[1].UID != p.UID || !outs[2].Created {
			t.Fatalf("outcomes %+v", outs)
		}
	})
	t.Run("tenant isolation", func(t *testing.T) {
		// The same identity in tenant b is a new finding.
		b0 := a0
		b0.Tenant, b0.UID = "b", "b-00000"
		outs := fsmInsert(t, f, 5, b0)
		if !outs[0].Created {
			t.Fatalf("tenant b deduplicated against tenant a: %+v", outs[0])
		}
		if _, err := f.finding("b", a0.UID); !errors.Is(err, ErrNoFinding) {
			t.Fatalf("tenant b sees tenant a's finding: %v", err)
		}
		pa, err := f.findings("b", FindingQuery{Limit: 100})
		if err != nil || pa.Total != 1 || len(pa.Findings) != 1 || pa.Findings[0].UID != b0.UID {
			t.Fatalf("tenant b's list: %+v, %v", pa, err)
		}
		if r := fsmApply(t, f, 6, PatchFinding{Tenant: "b", UID: a0.UID, State: new("Resolved")}); !errors.Is(r.Err, ErrNoFinding) {
			t.Fatalf("patch of another tenant's finding: %v", r.Err)
		}
		if pn, err := f.findings("nobody", FindingQuery{Limit: 10}); err != nil || pn.Total != 0 || len(pn.Findings) != 0 {
			t.Fatalf("unknown tenant: %+v, %v", pn, err)
		}
	})
	t.Run("uid taken", func(t *testing.T) {
		x := testFinding("a", 99, 1)
		x.UID = a0.UID
		outs := fsmInsert(t, f, 7, x)
		if !errors.Is(outs[0].Err, ErrInvalidCommand) || outs[0].Created {
			t.Fatalf("outcome %+v", outs[0])
		}
	})
}

// TestFSM_InsertFindings_UIDTaken checks the uid collision refusal
// around the tenant's greatest uid, which the insert does not look up
// for uids above it: the last stored uid, one in the middle, one stored
// earlier in the same entry, and new uids below and above the greatest.
func TestFSM_InsertFindings_UIDTaken(t *testing.T) {
	f := newTestFSM(t)
	fsmInsert(t, f, 1, testFinding("a", 10, 1000), testFinding("a", 20, 2000), testFinding("a", 30, 3000))
	with := func(n int, uid string) Finding {
		x := testFinding("a", n, int64(n)*1000)
		x.UID = uid
		return x
	}
	outs := fsmInsert(t, f, 2,
		with(40, "a-00030"), // the greatest stored uid
		with(41, "a-00020"), // a stored uid below it
		with(42, "a-00050"), // new, above the greatest
		with(43, "a-00050"), // taken earlier in this entry
		with(44, "a-00015"), // new, below the greatest
		with(45, "a-00060"), // new, above
		with(46, "a-00015"), // taken earlier in this entry, below
	)
	for i, created := range []bool{false, false, true, false, true, true, false} {
		o := outs[i]
		if o.Created != created || (!created && !errors.Is(o.Err, ErrInvalidCommand)) || (created && o.Err != nil) {
			t.Errorf("finding %d: outcome %+v, want created %v", i, o, created)
		}
	}
	if p, err := f.findings("a", FindingQuery{Limit: 100}); err != nil || p.Total != 6 || len(p.Findings) != 6 {
		t.Fatalf("%d findings (total %d), %v; want 6", len(p.Findings), p.Total, err)
	}
}

func TestFSM_PatchFinding(t *testing.T) {
	f := newTestFSM(t)
	a0 := testFinding("a", 0, 1000)
	fsmInsert(t, f, 1, a0)
	r := fsmApply(t, f, 2, PatchFinding{Tenant: "a", UID: a0.UID, State: new("InProgress"), Ticket: new("JIRA-1"), Severity: new("High"), Now: time.UnixMilli(9000)})
	if r.Err != nil || r.Index != 2 {
		t.Fatalf("patch: %+v", r)
	}
	got, _ := f.finding("a", a0.UID)
	want := a0
	want.State, want.Ticket, want.Severity, want.UpdatedMS = "InProgress", "JIRA-1", "High", 9000
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Clearing the ticket leaves the rest.
	fsmApply(t, f, 3, PatchFinding{Tenant: "a", UID: a0.UID, Ticket: new(""), Priority: new("Low"), Now: time.UnixMilli(9500)})
	got, _ = f.finding("a", a0.UID)
	want.Ticket, want.Priority, want.UpdatedMS = "", "Low", 9500
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if r := fsmApply(t, f, 4, PatchFinding{Tenant: "a", UID: "missing", State: new("Resolved")}); !errors.Is(r.Err, ErrNoFinding) || r.Index != 3 {
		t.Fatalf("patch of a missing finding: %+v", r)
	}
	if _, err := (PatchFinding{Tenant: "a", UID: a0.UID, State: new("")}).payload(); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("empty state: %v", err)
	}
}

func TestFSM_FindingsPaging(t *testing.T) {
	f := newTestFSM(t)
	// 250 findings over 50 distinct times (ties broken by uid), in 5
	// entries, in no particular order.
	const n = 250
	var all []Finding
	for i := range n {
		all = append(all, testFinding("a", (i*37)%n, int64(1000*(1+(i*37)%n/5))))
	}
	for e := range 5 {
		fsmInsert(t, f, uint64(e+1), all[e*50:(e+1)*50]...)
	}
	fsmInsert(t, f, 6, testFinding("b", 1, 999_999))

	// want: time descending, uid ascending.
	want := make([]string, 0, n)
	for tm := n/5 - 1; tm >= 0; tm-- {
		for k := range 5 {
			want = append(want, fmt.Sprintf("a-%05d", tm*5+k))
		}
	}

	walk := func(t *testing.T, q FindingQuery, limit int) ([]string, int) {
		var got []string
		total := -1
		for page := 0; ; page++ {
			q.Offset, q.Limit = page*limit, limit
			p, err := f.findings("a", q)
			if err != nil {
				t.Fatal(err)
			}
			if total >= 0 && p.Total != total {
				t.Fatalf("total changed from %d to %d", total, p.Total)
			}
			total = p.Total
			got = append(got, uids(p.Findings)...)
			if len(p.Findings) < limit {
				return got, total
			}
		}
	}
	t.Run("unfiltered", func(t *testing.T) {
		for _, limit := range []int{1, 7, 100, 1000} {
			got, total := walk(t, FindingQuery{}, limit)
			if total != n || strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("limit %d: total %d, order %v", limit, total, got)
			}
		}
	})
	t.Run("time range", func(t *testing.T) {
		// Times 10000 to 19999 ms: time slots 9 to 18.
		got, total := walk(t, FindingQuery{FromMS: 10_000, ToMS: 20_000}, 8)
		var w []string
		for _, u := range want {
			var k int
			fmt.Sscanf(u, "a-%d", &k)
			if ms := 1000 * (1 + k/5); ms >= 10_000 && ms < 20_000 {
				w = append(w, u)
			}
		}
		if total != 50 || strings.Join(got, ",") != strings.Join(w, ",") {
			t.Fatalf("total %d, got %v, want %v", total, got, w)
		}
	})
	fsmApply(t, f, 7, PatchFinding{Tenant: "a", UID: "a-00004", State: new("Resolved")})
	filters := func(t *testing.T) {
		cases := []struct {
			name string
			q    FindingQuery
			keep func(k int) bool
		}{
			{"tool", FindingQuery{ToolCode: "scan"}, func(k int) bool { return k%2 == 1 }},
			{"domain", FindingQuery{MonitoredDomainID: 2}, func(k int) bool { return k%3 == 1 }},
			{"username", FindingQuery{Username: "user7@example.com"}, func(k int) bool { return k == 7 }},
			{"state", FindingQuery{State: "Resolved"}, func(k int) bool { return k == 4 }},
			{"tool and time", FindingQuery{ToolCode: "leaks", ToMS: 3000}, func(k int) bool { return k%2 == 0 && k < 10 }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var w []string
				for _, u := range want {
					var k int
					fmt.Sscanf(u, "a-%d", &k)
					if tc.keep(k) {
						w = append(w, u)
					}
				}
				got, total := walk(t, tc.q, 3)
				if total != len(w) || strings.Join(got, ",") != strings.Join(w, ",") {
					t.Fatalf("total %d, got %v, want %v", total, got, w)
				}
			})
		}
	}
	// byTime runs fn on every by_time entry of tenant a.
	byTime := func(fn func(b *bolt.Bucket, k, v []byte) error) {
		t.Helper()
		err := f.db.Update(func(tx *bolt.Tx) error {
			tb, _, err := tenantFindings(tx, "a", false)
			if err != nil {
				return err
			}
			var keys, vals [][]byte
			err = tb.byTime.ForEach(func(k, v []byte) error {
				keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
				return nil
			})
			if err != nil {
				return err
			}
			for i := range keys {
				if err := fn(tb.byTime, keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Run("filters", func(t *testing.T) {
		// Every entry carries its filter fields, the patched state too.
		byTime(func(_ *bolt.Bucket, k, v []byte) error {
			fv, ok := parseFilterFields(v)
			if !ok {
				return fmt.Errorf("by_time %x has no filter fields: %x", k, v)
			}
			if uid := string(k[8:]); (uid == "a-00004") != (string(fv.state) == "Resolved") {
				return fmt.Errorf("by_time of %s has state %s", uid, fv.state)
			}
			return nil
		})
		filters(t)
	})
	t.Run("filters on entries written before filter fields", func(t *testing.T) {
		// Entries of older binaries have an empty value: the records are
		// read instead, with the same answers.
		n := 0
		byTime(func(b *bolt.Bucket, k, _ []byte) error {
			n++
			if n%2 == 0 {
				return nil
			}
			return b.Put(k, nil)
		})
		filters(t)
	})
	t.Run("page past the end", func(t *testing.T) {
		p, err := f.findings("a", FindingQuery{Offset: 1000, Limit: 10})
		if err != nil || p.Total != n || len(p.Findings) != 0 || p.Findings == nil {
			t.Fatalf("%+v, %v", p, err)
		}
	})
}

func TestFilterFields(t *testing.T) {
	r := findingRecord(testFinding("a", 5, 1))
	r.Username = strings.Repeat("ü", 200)
	fv, ok := parseFilterFields(filterFields(&r))
	if !ok || fv.domain != r.MonitoredDomainID || string(fv.state) != r.State || string(fv.tool) != r.ToolCode || string(fv.username) != r.Username {
		t.Fatalf("round trip: %+v %v", fv, ok)
	}
	good := filterFields(&r)
	for _, v := range [][]byte{nil, {}, {2}, {1}, good[:len(good)-1], append(bytes.Clone(good), 0)} {
		if _, ok := parseFilterFields(v); ok {
			t.Fatalf("parsed %x", v)
		}
	}
}

func TestFSM_FindingsSnapshotRestore(t *testing.T) {
	f := newTestFSM(t)
	fsmInsert(t, f, 1, testFinding("a", 0, 1000), testFinding("a", 1, 2000), testFinding("b", 0, 1000))
	fsmApply(t, f, 2, PatchFinding{Tenant: "a", UID: "a-00000", State: new("Resolved"), Now: time.UnixMilli(3000)})
	data := snapshotOf(t, f)

	g := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b"} {
		pf, _ := f.findings(tenant, FindingQuery{Limit: 10})
		pg, err := g.findings(tenant, FindingQuery{Limit: 10})
		if err != nil || fmt.Sprint(pf) != fmt.Sprint(pg) {
			t.Fatalf("tenant %s: restored %+v, %v; want %+v", tenant, pg, err, pf)
		}
	}
	// The restored state keeps deduplicating.
	outs := fsmInsert(t, g, 3, testFinding("a", 1, 9000))
	if outs[0].Created || outs[0].UID != "a-00001" {
		t.Fatalf("after restore: %+v", outs[0])
	}
	// A binary that reads format 2 at most refuses the snapshot.
	if format := stateFormatOf(t, g); format != strconv.Itoa(formatRecords) {
		t.Fatalf("format %q", format)
	}
}

func stateFormatOf(t *testing.T, f *fsm) string {
	t.Helper()
	var format string
	if err := f.view(func(tx *bolt.Tx) error {
		format = string(tx.Bucket(bucketState).Get(keyFormat))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return format
}

// TestFSM_FindingsFormat2 opens a state file written in format 2, whose
// dedupe index is a content-addressed bucket per tenant: its findings are
// still deduplicated, new ones go to finding_keys, and the file becomes
// format 3.
func TestFSM_FindingsFormat2(t *testing.T) {
	f := newTestFSM(t)
	fsmInsert(t, f, 1, testFinding("a", 0, 1000), testFinding("a", 1, 2000), testFinding("b", 0, 1000))
	// Rewrite the file as format 2 wrote it.
	if err := f.db.Update(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketFindingKeys).ForEach(func(_, v []byte) error {
			uid := string(v[dedupeKeySize:])
			tb, _, err := tenantFindings(tx, uid[:1], false)
			if err != nil {
				return err
			}
			if tb.dedupe == nil {
				if tb.dedupe, err = tb.t.CreateBucket(bucketDedupe); err != nil {
					return err
				}
			}
			return tb.dedupe.Put(v[:dedupeKeySize], []byte(uid))
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketFindingKeys); err != nil {
			return err
		}
		return tx.Bucket(bucketState).Put(keyFormat, []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	// What openFSM loads.
	keys, err := readFindingKeys(f.db)
	if err != nil {
		t.Fatal(err)
	}
	g := f
	g.keys = keys
	if format := stateFormatOf(t, g); format != "2" {
		t.Fatalf("format %q before any insert", format)
	}
	dup := testFinding("a", 1, 9000)
	dup.UID = "a-again"
	outs := fsmInsert(t, g, 2, dup, testFinding("a", 2, 3000), testFinding("b", 1, 3000))
	if outs[0].Created || outs[0].UID != "a-00001" || !outs[1].Created || !outs[2].Created {
		t.Fatalf("outcomes %+v", outs)
	}
	if format := stateFormatOf(t, g); format != strconv.Itoa(formatRecords) {
		t.Fatalf("format %q after an insert", format)
	}
	// The new findings are found in finding_keys, the old ones in their
	// tenant's dedupe bucket.
	again := []Finding{testFinding("a", 0, 1), testFinding("a", 2, 1), testFinding("b", 0, 1), testFinding("b", 1, 1)}
	for i := range again {
		again[i].UID = fmt.Sprintf("x-%d", i)
	}
	for i, o := range fsmInsert(t, g, 3, again...) {
		if o.Created || o.UID != []string{"a-00000", "a-00002", "b-00000", "b-00001"}[i] {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
	if p, _ := g.findings("a", FindingQuery{}); p.Total != 3 {
		t.Fatalf("tenant a has %d findings, want 3", p.Total)
	}
}

// TestFindingKeys_Collisions checks keys that share a fingerprint (their
// first 8 bytes) but differ after it, before and after a reload.
func TestFindingKeys_Collisions(t *testing.T) {
	f := newTestFSM(t)
	key := func(last byte) []byte {
		k := bytes.Repeat([]byte{7}, dedupeKeySize)
		k[dedupeKeySize-1] = last
		return k
	}
	check := func(fk *findingKeys) {
		t.Helper()
		if err := f.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketFindingKeys)
			for i := range byte(3) {
				if got, _ := fk.lookup(b, key(i)); string(got) != fmt.Sprint("uid-", i) {
					t.Errorf("key %d: uid %q", i, got)
				}
			}
			if got, _ := fk.lookup(b, key(9)); got != nil {
				t.Errorf("unknown key with a known fingerprint: uid %q", got)
			}
			other := key(0)
			other[0] = 8
			if got, _ := fk.lookup(b, other); got != nil {
				t.Errorf("unknown fingerprint: uid %q", got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	fk, err := readFindingKeys(f.db)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketFindingKeys)
		if err != nil {
			return err
		}
		for i := range byte(3) {
			_, known := fk.lookup(b, key(i))
			if err := fk.insert(b, key(i), fmt.Sprint("uid-", i), known); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(fk.first) != 1 || len(fk.more[binary.BigEndian.Uint64(key(0))]) != 2 {
		t.Fatalf("index %+v", fk)
	}
	check(fk)
	reloaded, err := readFindingKeys(f.db)
	if err != nil {
		t.Fatal(err)
	}
	check(reloaded)
}

// TestFSM_ClearFindingsForgetsKeys: after ClearFindings nothing is a
// duplicate, also after a reload.
func TestFSM_ClearFindingsForgetsKeys(t *testing.T) {
	f := newTestFSM(t)
	fsmInsert(t, f, 1, testFinding("a", 0, 1000))
	fsmApply(t, f, 2, ClearFindings{})
	if len(f.keys.first) != 0 {
		t.Fatalf("%d keys left", len(f.keys.first))
	}
	if outs := fsmInsert(t, f, 3, testFinding("a", 0, 1000)); !outs[0].Created {
		t.Fatalf("after clear: %+v", outs[0])
	}
	fk, err := readFindingKeys(f.db)
	if err != nil || len(fk.first) != 1 {
		t.Fatalf("reloaded %d keys, %v", len(fk.first), err)
	}
}

// TestFSM_FindingsReadsDuringRestore reads findings while Restore swaps
// the state file (run with -race).
func TestFSM_FindingsReadsDuringRestore(t *testing.T) {
	f := newTestFSM(t)
	fsmInsert(t, f, 1, testFinding("a", 0, 1000))
	data := snapshotOf(t, f)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.finding("a", "a-00000"); err != nil {
					t.Errorf("read during restore: %v", err)
					return
				}
			}
		})
	}
	for range 5 {
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestStore_InsertFindingBatches(t *testing.T) {
	s := openStore(t, func() Config { c := testConfig(t, "n1"); c.Bootstrap = true; return c }())
	waitReady(t, s)
	ctx := ctxTimeout(t, 20*time.Second)
	const n = 200
	before := s.Index()
	var wg sync.WaitGroup
	outs := make([]FindingOutcome, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Every finding twice: the second is deduplicated.
			outs[i], errs[i] = s.InsertFinding(ctx, testFinding("a", i/2, int64(i)))
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil || outs[i].Err != nil {
			t.Fatalf("insert %d: %v %v", i, errs[i], outs[i].Err)
		}
		if outs[i].Created {
			created++
		}
		if want := fmt.Sprintf("a-%05d", i/2); outs[i].UID != want {
			t.Fatalf("insert %d: uid %s, want %s", i, outs[i].UID, want)
		}
	}
	if created != n/2 {
		t.Fatalf("%d created, want %d", created, n/2)
	}
	// Fewer log entries than inserts: they were batched.
	if entries := s.Index() - before; entries >= n/2 {
		t.Fatalf("%d log entries for %d inserts", entries, n)
	}
	p, err := s.Findings("a", FindingQuery{Limit: 1000})
	if err != nil || p.Total != n/2 || len(p.Findings) != n/2 {
		t.Fatalf("list: total %d, %d findings, %v", p.Total, len(p.Findings), err)
	}
	if err := s.PatchFinding(ctx, nil, PatchFinding{Tenant: "a", UID: "nope", State: new("Resolved")}); !errors.Is(err, ErrNoFinding) {
		t.Fatalf("patch missing: %v", err)
	}
	if _, err := s.InsertFinding(ctx, Finding{Tenant: "a"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("invalid finding: %v", err)
	}
}

// TestStore_InsertFindingAlone: inserts that come one at a time do not
// wait for the group-commit window (here an hour: an insert that waited
// for it would fail on the context's deadline).
func TestStore_InsertFindingAlone(t *testing.T) {
	s := openStore(t, func() Config { c := testConfig(t, "n1"); c.Bootstrap = true; return c }())
	waitReady(t, s)
	s.findingBatch.mu.Lock()
	s.findingBatch.wait = time.Hour
	s.findingBatch.mu.Unlock()
	ctx := ctxTimeout(t, 20*time.Second)
	for i := range 5 {
		out, err := s.InsertFinding(ctx, testFinding("a", i, int64(i)))
		if err != nil || !out.Created {
			t.Fatalf("insert %d: %+v, %v", i, out, err)
		}
	}
}

func TestStore_FindingsReplicated(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	leader := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 10*time.Second)
	outs, err := leader.InsertFindings(ctx, []Finding{testFinding("a", 0, 1000), testFinding("a", 1, 2000)})
	if err != nil || !outs[0].Created || !outs[1].Created {
		t.Fatalf("insert: %+v, %v", outs, err)
	}
	waitConverged(t, nodes)
	for _, s := range nodes {
		p, err := s.Findings("a", FindingQuery{Limit: 10})
		if err != nil || fmt.Sprint(uids(p.Findings)) != "[a-00001 a-00000]" {
			t.Fatalf("%s: %+v, %v", s.ID(), p, err)
		}
	}
	for _, s := range nodes {
		if !s.IsLeader() {
			if _, err := s.InsertFinding(ctx, testFinding("a", 2, 3000)); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("insert on follower %s: %v", s.ID(), err)
			}
		}
	}
}

// TestStore_InsertFindingLate: a batch whose window ends while another
// batch is in raft stays open (the callers of the batch in raft join it
// when they come back) until that batch is answered, and is submitted
// half a window after the answer.
func TestStore_InsertFindingLate(t *testing.T) {
	s := openStore(t, func() Config { c := testConfig(t, "n1"); c.Bootstrap = true; return c }())
	waitReady(t, s)
	ctx := ctxTimeout(t, 20*time.Second)
	b := &s.findingBatch
	b.mu.Lock()
	b.wait = time.Millisecond
	b.inFlight++ // a batch in raft, answered below
	b.lastSize = 2
	b.mu.Unlock()
	before := s.Index()
	type answer struct {
		out FindingOutcome
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := s.InsertFinding(ctx, testFinding("a", 0, 1))
		done <- answer{out, err}
	}()
	// Until its window ended: it is late, not submitted.
	for {
		b.mu.Lock()
		late := b.cur != nil && b.cur.late
		b.mu.Unlock()
		if late {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the batch's window did not end")
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case a := <-done:
		t.Fatalf("answered while another batch was in raft: %+v", a)
	default:
	}
	if got := s.Index(); got != before {
		t.Fatalf("index %d, want %d: the late batch was submitted", got, before)
	}
	b.answered(2)
	select {
	case a := <-done:
		if a.err != nil || !a.out.Created {
			t.Fatalf("insert: %+v, %v", a.out, a.err)
		}
	case <-ctx.Done():
		t.Fatal("the late batch was not submitted after the answer")
	}
}
