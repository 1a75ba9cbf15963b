package master_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// mountFindings mounts the findings API, encrypting passwords with key.
func mountFindings(t *testing.T, key []byte) mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) {
		sealer, err := findings.NewSealer(key)
		if err != nil {
			t.Error(err)
			return
		}
		cfg := findings.Default()
		cfg.Sealer = sealer
		a := findings.New(cfg, s.Store(), s.Verifier(), nil)
		if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeader); err != nil {
			t.Error(err)
		}
	})
}

// do is c.Do, retried while the cluster answers 503 (an election on a
// loaded machine), as a client would: every request of
// TestServer_BackupRestoreFindings is safe to repeat (inserts deduplicate,
// a patch sets the same fields, a restore starts over).
func do(t *testing.T, c *mastertest.Cluster, node int, method, path, token string, body []byte) (*http.Response, []byte) {
	t.Helper()
	for try := 0; ; try++ {
		resp, out := c.Do(node, method, path, token, body)
		if resp.StatusCode != http.StatusServiceUnavailable || try == 100 {
			return resp, out
		}
		select {
		case <-time.After(50 * time.Millisecond): // client backoff
		case <-t.Context().Done():
			return resp, out
		}
	}
}

// TestServer_BackupRestoreFindings backs up a 3-node cluster's findings
// (encrypted at rest) over HTTP through a follower, and restores them into
// the same cluster and into a new one with the same key: the restored
// findings are the backup's, readable in clear through the API, and the
// backup file never holds a password in clear.
func TestServer_BackupRestoreFindings(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	c := mastertest.TestCluster(t, 3, mountFindings(t, key))
	f := c.Followers()[0]
	tokens := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		tokens[tenant] = c.Token(auth.FindingsClaims("scanner", tenant, auth.FindingsRead, auth.FindingsWrite))
	}
	const secret = "correct-horse-battery-staple"
	insert := func(c *mastertest.Cluster, node int, tenant string, n int) string {
		t.Helper()
		body := fmt.Sprintf(`{"monitored_domain_id": %d, "tool_code": "leaks", "resource_url": "https://example.com/login",
			"username": "user%d@example.com", "password": "%s-%d"}`, 1+n%2, n, secret, n)
		resp, out := do(t, c, node, http.MethodPut, findings.Prefix+"findings/credentials", tokens[tenant], []byte(body))
		// A retried insert that had been stored after all is 201 too.
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("insert: %d %s", resp.StatusCode, out)
		}
		return decode[struct{ UID string }](t, out).UID
	}
	list := func(c *mastertest.Cluster, node int, tenant string) findings.Envelope {
		t.Helper()
		resp, out := do(t, c, node, http.MethodGet, findings.Prefix+"findings/credential?limit=1000", tokens[tenant], nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %d %s", resp.StatusCode, out)
		}
		return decode[findings.Envelope](t, out)
	}
	for n := range 30 {
		insert(c, n%3, []string{"acme", "globex"}[n%2], n)
	}
	uid := list(c, f, "acme").Findings[0].UID
	resp, out := do(t, c, f, http.MethodPatch, findings.Prefix+"finding/"+uid, tokens["acme"], []byte(`{"state":"Acknowledged","ticket":"T-7"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("patch: %d %s", resp.StatusCode, out)
	}
	want := map[string]findings.Envelope{"acme": list(c, f, "acme"), "globex": list(c, f, "globex")}
	// The restores below must give the same tool and organization ids
	// (compared with the rest of each finding).
	if v := want["acme"].Findings[0]; v.Tool.ID == nil || v.Organization.ID == nil {
		t.Fatalf("finding without ids: tool %v, organization %v", v.Tool.ID, v.Organization.ID)
	}

	// At rest on every node (raft log, state file, a fresh snapshot) the
	// passwords are encrypted: sealed on the leader before raft.
	c.WaitConverged()
	for _, i := range c.Running() {
		if err := c.Server(i).Store().Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		if clear := filetest.Holding(t, c.DataDir(i), secret); len(clear) > 0 {
			t.Fatalf("node %d: %v hold a password in clear", i, clear)
		}
		if sealed := filetest.Holding(t, c.DataDir(i), "enc:v1:"); !slices.Equal(sealed, []string{"fsm.db", "raft.db", "state.bin"}) {
			t.Fatalf("node %d: encrypted passwords found in %v, want the log, the state file and the snapshot", i, sealed)
		}
	}
	if want["acme"].Total != 15 || want["globex"].Total != 15 {
		t.Fatalf("totals %d %d", want["acme"].Total, want["globex"].Total)
	}

	resp, backup := do(t, c, f, http.MethodGet, "/squall/v1/backup", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "squall-backup-") {
		t.Fatalf("backup: %d %s", resp.StatusCode, backup)
	}
	if bytes.Contains(backup, []byte(secret)) {
		t.Fatal("the backup file holds a password in clear")
	}
	b, err := store.DecodeBackup(bytes.NewReader(backup))
	if err != nil || len(b.Findings) != 30 || !b.WithFindings {
		t.Fatalf("backup file: %v, %d findings", err, len(b.Findings))
	}

	// Changes after the backup are undone by the restore.
	insert(c, f, "acme", 100)
	resp, out = do(t, c, f, http.MethodPatch, findings.Prefix+"finding/"+uid, tokens["acme"], []byte(`{"state":"Resolved"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("patch: %d %s", resp.StatusCode, out)
	}
	resp, out = do(t, c, f, http.MethodPost, "/squall/v1/restore", c.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore: %d %s", resp.StatusCode, out)
	}
	if r := decode[master.RestoreResult](t, out); r.Findings != 30 || r.Duplicates != 0 {
		t.Fatalf("restore result %+v", r)
	}
	same := func(c *mastertest.Cluster, node int) bool {
		for tenant, w := range want {
			resp, out := do(t, c, node, http.MethodGet, findings.Prefix+"findings/credential?limit=1000", tokens[tenant], nil)
			if resp.StatusCode != http.StatusOK {
				return false
			}
			got, _ := json.Marshal(decode[findings.Envelope](t, out))
			wj, _ := json.Marshal(w)
			if !bytes.Equal(got, wj) {
				return false
			}
		}
		return true
	}
	// Every node answers through the leader (OnLeader); wait until each
	// node's own state has the restore too, then compare.
	c.WaitConverged()
	leader := c.Server(c.Leader()).Store()
	for _, i := range c.Running() {
		if !same(c, i) {
			t.Fatalf("node %d: findings after the restore differ from the backup's", i)
		}
	}
	// The clear passwords come back through the API.
	if pt := want["acme"].Findings[0].PlainText; !strings.HasPrefix(pt, secret) {
		t.Fatalf("plain_text %q", pt)
	}

	// Into a new cluster with the same key (disaster recovery).
	other := mastertest.TestCluster(t, 1, mountFindings(t, key))
	for tenant := range tokens {
		tokens[tenant] = other.Token(auth.FindingsClaims("scanner", tenant, auth.FindingsRead, auth.FindingsWrite))
	}
	resp, out = do(t, other, 0, http.MethodPost, "/squall/v1/restore", other.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore into a new cluster: %d %s", resp.StatusCode, out)
	}
	if !same(other, 0) {
		t.Fatal("new cluster: findings differ from the backup's")
	}
	// Dedupe holds across the restore: the same credential again is the
	// restored finding.
	body := fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "leaks", "resource_url": "https://example.com/login",
			"username": "user0@example.com", "password": "%s-0"}`, secret)
	resp, out = do(t, other, 0, http.MethodPut, findings.Prefix+"findings/credentials", tokens["acme"], []byte(body))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(findings.HeaderDuplicate) != "true" {
		t.Fatalf("re-insert of a restored finding: %d %s, want 201 and %s", resp.StatusCode, out, findings.HeaderDuplicate)
	}

	// A file with a bad finding changes nothing.
	idx := leader.Index()
	bad := bytes.Replace(backup, []byte(`"state":"Unassigned"`), []byte(`"state":""`), 1)
	resp, out = do(t, c, f, http.MethodPost, "/squall/v1/restore", c.AdminToken, bad)
	wantError(t, resp, out, http.StatusBadRequest, "BAD_REQUEST")
	if leader.Index() != idx {
		t.Fatalf("a refused restore changed the state: %d -> %d", idx, leader.Index())
	}
}

// TestServer_RestoreTreeLimits: a backup whose tree is over the limits
// (a node name longer than config.MaxNameLength) is refused over HTTP and
// changes nothing.
func TestServer_RestoreTreeLimits(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	leader := c.Server(c.Leader()).Store()
	root := config.NewRoot()
	root.Children = append(root.Children, &config.Node{Kind: config.KindFilter, Name: strings.Repeat("n", config.MaxNameLength+1), Active: true})
	backup, err := json.Marshal(&store.Backup{Active: root})
	if err != nil {
		t.Fatal(err)
	}
	idx := leader.Index()
	resp, out := do(t, c, c.Leader(), http.MethodPost, "/squall/v1/restore", c.AdminToken, backup)
	wantError(t, resp, out, http.StatusConflict, "VALIDATION_ERROR")
	if !strings.Contains(string(out), "node_name_length") {
		t.Errorf("the answer names no limit: %s", out)
	}
	if leader.Index() != idx {
		t.Fatalf("a refused restore changed the state: %d -> %d", idx, leader.Index())
	}
}
