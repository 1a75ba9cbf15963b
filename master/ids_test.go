package master_test

import (
	"bytes"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// TestServer_FindingIDs: through the findings API of a real 3-node
// cluster, tool.id and organization.id are integers (the spec's type),
// the same tool and the same tenant keep theirs, and every node's state
// holds the same ids: after inserts through every node, on a follower
// that caught up by installing a snapshot, and after the leader is
// killed, where the next leader numbers on.
func TestServer_FindingIDs(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{9}, 32)
	c := mastertest.TestCluster(t, 3, mountFindings(t, key), mastertest.WithConfig(func(_ int, cfg *master.Config) {
		prev := cfg.StoreOptions
		cfg.StoreOptions = func(sc *store.Config) {
			if prev != nil {
				prev(sc)
			}
			sc.TrailingLogs = 2
			sc.SnapshotThreshold = 16
		}
	}))
	tokens := map[string]string{}
	token := func(tenant string) string {
		if tokens[tenant] == "" {
			tokens[tenant] = c.Token(auth.FindingsClaims("scanner", tenant, auth.FindingsRead, auth.FindingsWrite))
		}
		return tokens[tenant]
	}
	insert := func(node int, tenant, tool string, n int) {
		t.Helper()
		body := fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": %q, "resource_url": "https://example.com/login",
			"username": "user%d@example.com", "password": "pw-%d"}`, tool, n, n)
		resp, out := do(t, c, node, http.MethodPut, findings.Prefix+"findings/credentials", token(tenant), []byte(body))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("insert: %d %s", resp.StatusCode, out)
		}
	}
	// ids reads every finding of tenant through node's API and returns
	// the ids they answer: tenant's, and each tool code's.
	ids := func(node int, tenant string) (int64, map[string]int64) {
		t.Helper()
		resp, out := do(t, c, node, http.MethodGet, findings.Prefix+"findings/credential?limit=1000", token(tenant), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %d %s", resp.StatusCode, out)
		}
		env := decode[findings.Envelope](t, out)
		if env.Total == 0 {
			t.Fatalf("no findings of %s", tenant)
		}
		var org int64
		tools := map[string]int64{}
		for _, f := range env.Findings {
			if f.Tool.ID == nil || f.Organization.ID == nil {
				t.Fatalf("finding %s answers tool.id %v, organization.id %v: want integers", f.UID, f.Tool.ID, f.Organization.ID)
			}
			if org != 0 && *f.Organization.ID != org {
				t.Fatalf("tenant %s answers organization ids %d and %d", tenant, org, *f.Organization.ID)
			}
			org = *f.Organization.ID
			if id, ok := tools[f.Tool.Name]; ok && id != *f.Tool.ID {
				t.Fatalf("tool %s answers ids %d and %d", f.Tool.Name, id, *f.Tool.ID)
			}
			tools[f.Tool.Name] = *f.Tool.ID
		}
		return org, tools
	}
	// sameState waits until every running node applied the leader's
	// state and checks that all hold the same ids, and returns them.
	sameState := func() *store.IDs {
		t.Helper()
		c.WaitConverged()
		leader := c.Server(c.Leader()).Store()
		want, err := leader.IDs()
		if err != nil || want == nil {
			t.Fatalf("leader's ids: %+v %v", want, err)
		}
		for _, i := range c.Running() {
			if got, err := c.Server(i).Store().IDs(); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("node %d holds ids %+v (%v), the leader %+v", i, got, err, want)
			}
		}
		return want
	}

	for n := range 12 {
		insert(n%3, []string{"acme", "globex"}[n%2], []string{"leaks", "scan", "paste"}[n%3], n)
	}
	acme, acmeTools := ids(0, "acme")
	globex, globexTools := ids(1, "globex")
	if acme == globex {
		t.Fatalf("tenants acme and globex share the id %d", acme)
	}
	for tool, id := range acmeTools {
		if g, ok := globexTools[tool]; ok && g != id {
			t.Fatalf("tool %s: id %d for acme, %d for globex", tool, id, g)
		}
	}
	want := sameState()
	if want.Tenants["acme"] != acme || want.Tenants["globex"] != globex || len(want.Tools) != 3 {
		t.Fatalf("state ids %+v; the API answered acme %d, globex %d", want, acme, globex)
	}

	// A follower cut off while new tools and tenants come, the log
	// compacted behind it, catches up by installing a snapshot.
	lag := c.Followers()[0]
	c.Partition(lag)
	for n := 12; n < 40; n++ {
		insert(c.Leader(), fmt.Sprintf("tenant%d", n%4), fmt.Sprintf("tool%d", n%5), n)
	}
	if err := c.Server(c.Leader()).Store().Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Heal(lag)
	want = sameState()
	if len(want.Tools) != 8 || len(want.Tenants) != 6 {
		t.Fatalf("ids %+v", want)
	}
	if n := c.Counter(t, lag, "squall_store_fsm_restores_total"); n == 0 {
		t.Fatalf("node %d caught up without installing a snapshot", lag)
	}

	// The leader is killed; the next numbers on, and the ids answered
	// before stay.
	c.Kill(c.Leader())
	survivor := c.Running()[0]
	insert(survivor, "acme", "fresh", 100)
	insert(survivor, "newcorp", "leaks", 101)
	got := sameState()
	if got.Tools["fresh"] != int64(len(want.Tools))+1 || got.Tenants["newcorp"] != int64(len(want.Tenants))+1 {
		t.Fatalf("ids after the leader was killed %+v (before %+v)", got, want)
	}
	if again, tools := ids(survivor, "acme"); again != acme || tools["leaks"] != acmeTools["leaks"] || tools["fresh"] != got.Tools["fresh"] {
		t.Fatalf("acme now answers %d %v, before %d %v", again, tools, acme, acmeTools)
	}
}
