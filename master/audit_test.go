package master_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// mountAuditAPI mounts the configuration, versions and audit APIs, as
// squall master does.
func mountAuditAPI() mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) {
		a := mountVersions(s)
		if err := s.Mount(api.AuditPath, a.AuditHandler(s.Store()), master.OnLeader); err != nil {
			panic(err)
		}
	})
}

// listAudit reads the audit log through node i with query q.
func listAudit(t *testing.T, c *mastertest.Cluster, i int, token, q string) api.AuditList {
	t.Helper()
	resp, out := do(t, c, i, http.MethodGet, api.AuditPath+q, token, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("audit%s: %d %s", q, resp.StatusCode, out)
	}
	return decode[api.AuditList](t, out)
}

// nodeRecords returns node i's records, oldest first.
func nodeRecords(t *testing.T, c *mastertest.Cluster, i int) []audit.Record {
	t.Helper()
	recs, err := c.Server(i).Store().AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestAudit_Failover: changes made through the API (through a follower)
// are recorded with the user, the authorization, the request id and the
// leader's time; every node holds the same chain, which verifies, also
// after the leader is killed and the new leader records more; the API
// filters and pages, and refuses tokens without admin on the root (403)
// and bad parameters (400) as JSON. A record altered in a copy of a
// node's state file breaks the chain at that record.
func TestAudit_Failover(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountAuditAPI())
	f := c.Followers()[0]
	start := time.Now().UnixMilli()
	resp, out := do(t, c, f, http.MethodPost, api.Prefix+"config/drafts/root", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create draft: %d %s", resp.StatusCode, out)
	}
	id := decode[api.DraftID](t, out).ID
	resp, out = do(t, c, f, http.MethodPost, api.Prefix+"config/draft/tree/details/root/"+id+"/root", c.AdminToken, []byte(`{"type":"Ruleset","name":"rs1"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("add a node: %d %s", resp.StatusCode, out)
	}
	deployHTTP(t, c, f, c.AdminToken, "root", id, "first")
	end := time.Now().UnixMilli()

	list := listAudit(t, c, f, c.AdminToken, "?user=admin")
	if len(list.Records) != 3 {
		t.Fatalf("admin's records %+v, want 3", list.Records)
	}
	want := []struct{ action, detail string }{{"tree.deploy", "version 1"}, {"draft.edit", "add_node root"}, {"draft.create", ""}}
	for k, r := range list.Records {
		if r.Action != want[k].action || r.Detail != want[k].detail || r.User != "admin" || r.Authorization != "root" ||
			r.RequestID == "" || r.Result != audit.ResultApplied || r.TimeMS < start || r.TimeMS > end || r.Target != id {
			t.Fatalf("record %d = %+v, want %s %q by admin under root with a request id, between %d and %d", k, r, want[k].action, want[k].detail, start, end)
		}
	}

	// Filters and paging.
	if got := listAudit(t, c, f, c.AdminToken, "?action=tree.deploy").Records; len(got) != 1 || got[0].Action != "tree.deploy" {
		t.Fatalf("deploys %+v", got)
	}
	if got := listAudit(t, c, f, c.AdminToken, "?user=nobody").Records; len(got) != 0 {
		t.Fatalf("nobody's records %+v", got)
	}
	later := time.UnixMilli(end + 60_000).UTC().Format(time.RFC3339)
	if got := listAudit(t, c, f, c.AdminToken, "?since="+later).Records; len(got) != 0 {
		t.Fatalf("records since %s: %+v", later, got)
	}
	page := listAudit(t, c, f, c.AdminToken, "?limit=1")
	if len(page.Records) != 1 || page.NextBefore != page.Records[0].Seq {
		t.Fatalf("first page %+v", page)
	}
	next := listAudit(t, c, f, c.AdminToken, fmt.Sprintf("?limit=1&before=%d", page.NextBefore))
	if len(next.Records) != 1 || next.Records[0].Seq != page.NextBefore-1 {
		t.Fatalf("second page %+v after %+v", next, page)
	}

	// Refusals.
	viewer := c.Token(auth.Claims{User: "viewer", Auths: map[string]auth.Authorization{"root": {Path: []string{"root"}, Roles: []string{"edit"}}}})
	scopedAdmin := c.Token(auth.Claims{User: "tenant-admin", Auths: map[string]auth.Authorization{"t": {Path: []string{"root", "t"}, Roles: []string{"admin"}}}})
	for _, tc := range []struct {
		name, token, q string
		status         int
		code           string
	}{
		{"edit on the root", viewer, "", http.StatusForbidden, "FORBIDDEN"},
		{"admin below the root", scopedAdmin, "", http.StatusForbidden, "FORBIDDEN"},
		{"no token", "", "", http.StatusUnauthorized, "UNAUTHORIZED"},
		{"bad limit", c.AdminToken, "?limit=0", http.StatusBadRequest, "BAD_REQUEST"},
		{"bad before", c.AdminToken, "?before=x", http.StatusBadRequest, "BAD_REQUEST"},
		{"bad since", c.AdminToken, "?since=yesterday", http.StatusBadRequest, "BAD_REQUEST"},
	} {
		resp, out := do(t, c, f, http.MethodGet, api.AuditPath+tc.q, tc.token, nil)
		if resp.StatusCode != tc.status || errorCode(t, out) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, out, tc.status, tc.code)
		}
	}

	// Every node holds the same chain; after a failover the new leader
	// goes on with it.
	c.WaitConverged()
	ref := nodeRecords(t, c, c.Leader())
	if err := audit.Verify(ref); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.Running() {
		if got := nodeRecords(t, c, i); !reflect.DeepEqual(got, ref) {
			t.Fatalf("node %d's records differ from the leader's:\n%+v\n%+v", i, got, ref)
		}
	}
	old := c.Leader()
	c.Kill(old)
	via := c.Followers()[0]
	resp, out = do(t, c, via, http.MethodDelete, api.Prefix+"config/drafts/root/"+id, c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete the draft: %d %s", resp.StatusCode, out)
	}
	c.Restart(old)
	c.WaitConverged()
	all := nodeRecords(t, c, c.Leader())
	if err := audit.Verify(all); err != nil {
		t.Fatalf("after the failover: %v", err)
	}
	if !reflect.DeepEqual(all[:len(ref)], ref) || all[len(all)-1].Action != "draft.delete" {
		t.Fatalf("after the failover: %+v, want %+v then the delete", all, ref)
	}
	for _, i := range c.Running() {
		mastertest.WaitFor(t, 10*time.Second, func() bool {
			got, err := c.Server(i).Store().AuditRecords()
			return err == nil && reflect.DeepEqual(got, all)
		}, fmt.Sprintf("node %d to hold the leader's chain", i))
	}

	// A copy of a stopped node's state file, one record altered: the
	// chain breaks at that record.
	c.Stop(old)
	data, err := os.ReadFile(filepath.Join(c.DataDir(old), "fsm.db"))
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "fsm.db")
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := store.ReadAuditFile(cp)
	if err != nil || audit.Verify(recs) != nil {
		t.Fatalf("the copy's records: %v", err)
	}
	victim := recs[len(recs)-2]
	db, err := bolt.Open(cp, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		k := make([]byte, 8)
		for j := range 8 {
			k[7-j] = byte(victim.Seq >> (8 * j))
		}
		r := victim
		r.User = "mallory"
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return b.Put(k, raw)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	recs, err = store.ReadAuditFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	var be *audit.BrokenError
	if err := audit.Verify(recs); !errors.As(err, &be) || be.Seq != victim.Seq {
		t.Fatalf("verify the altered copy: %v, want the chain broken at record %d", err, victim.Seq)
	}
}
