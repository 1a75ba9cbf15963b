package master_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/nettest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// members returns node i's view of the members: id, raft and HTTP
// addresses, suffrage.
func members(t *testing.T, c *mastertest.Cluster, i int) []store.Member {
	t.Helper()
	st, err := c.Server(i).Store().Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for j := range st.Members {
		st.Members[j].Leader = false
	}
	return st.Members
}

// TestCluster_JoinAuthenticated runs the attacks of issue 13 against a
// real 3-node cluster: joins without the secret or with a wrong one are
// refused on any node before the body is read, and joins with the secret
// that fail (an unreachable or silent raft address, for a new node or to
// move an existing one) change neither the members nor their HTTP
// addresses; the cluster keeps taking writes through every node.
func TestCluster_JoinAuthenticated(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	leader := c.Leader()
	f := c.Followers()[0]
	before := members(t, c, leader)
	unchanged := func(what string) {
		t.Helper()
		c.WaitConverged()
		for _, i := range c.Running() {
			if got := members(t, c, i); !reflect.DeepEqual(got, before) {
				t.Fatalf("after %s node %d has members %+v, want %+v", what, i, got, before)
			}
		}
	}
	victim := c.Server(f)
	hijack := `{"id":"` + victim.ID() + `","raft_addr":"` + victim.RaftAddr() + `","http_addr":"127.0.0.1:9"}`

	for _, i := range []int{leader, f} {
		resp, body := postJoin(t, c.URL(i), "", hijack)
		wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
		resp, body = postJoin(t, c.URL(i), c.JoinToken()+"x", hijack)
		wantError(t, resp, body, http.StatusForbidden, "FORBIDDEN")
		// The header is checked before the body is read: an oversized
		// body without the secret is a 401, not a 413.
		resp, body = postJoin(t, c.URL(i), "", strings.Repeat(" ", 1<<20))
		wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
	}
	unchanged("unauthenticated joins")

	rogue := nettest.SilentListener(t)
	for _, tc := range []struct{ name, body string }{
		{"move to an unreachable address", `{"id":"` + victim.ID() + `","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:9"}`},
		{"move to a silent listener", `{"id":"` + victim.ID() + `","raft_addr":"` + rogue + `","http_addr":"127.0.0.1:9"}`},
		{"new node at a silent listener", `{"id":"rogue","raft_addr":"` + rogue + `","http_addr":"127.0.0.1:9"}`},
	} {
		resp, body := postJoinThroughElections(t, c, f, tc.body)
		wantError(t, resp, body, http.StatusBadGateway, "NODE_UNREACHABLE")
		unchanged(tc.name)
	}
	for _, i := range c.Running() {
		appendVia(t, c, i, "written_via_"+c.Server(i).ID())
	}
}

// TestServer_GeneratedJoinSecret: a node that bootstraps without a join
// secret writes one into its data dir (0600, never logged); a node that
// would join without one does not start and says where the secret is; a
// node given a copy joins; the bootstrap node keeps its secret across a
// restart; and an existing member whose data dir has no secret (a cluster
// formed before joins were always authenticated) makes one and goes on.
func TestServer_GeneratedJoinSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs logtest.Buffer
	newNode := func(id string, mod func(*master.Config)) *master.Server {
		t.Helper()
		cfg := master.Default()
		cfg.NodeID, cfg.DataDir, cfg.AllowUnsignedTokens = id, filepath.Join(dir, id), true
		cfg.HTTPAddr, cfg.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Logger = newTestLogger(&logs)
		cfg.StoreOptions = func(sc *store.Config) {
			sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
			sc.NoSync = true
		}
		mod(&cfg)
		s, err := master.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	start := func(s *master.Server) {
		t.Helper()
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Shutdown(context.WithoutCancel(t.Context())) })
	}
	boot := newNode("node0", func(c *master.Config) { c.Bootstrap = true })
	start(boot)
	secretFile := filepath.Join(dir, "node0", master.JoinSecretFile)
	fi, err := os.Stat(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	secret = bytes.TrimSpace(secret)
	if raw, err := hex.DecodeString(string(secret)); err != nil || len(raw) != 32 {
		t.Fatalf("secret %d bytes, %v; want 32 random bytes in hex", len(raw), err)
	}
	if !strings.Contains(logs.String(), secretFile) {
		t.Fatalf("the log does not say where the secret is:\n%s", logs.String())
	}
	mastertest.WaitFor(t, 10*time.Second, func() bool { return boot.Store().Ready() }, "node0 to lead")
	resp, body := postJoin(t, boot.URL(), "", `{"id":"x","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`)
	wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")

	// Without the secret a joining node does not start.
	lost := newNode("node1", func(c *master.Config) { c.JoinURLs = []string{boot.URL()} })
	err = lost.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), master.JoinSecretFile) || !strings.Contains(err.Error(), "--join-token-file") {
		t.Fatalf("start without the join secret: %v", err)
	}
	_ = lost.Shutdown(t.Context())

	// With a copy it joins as a voter.
	joiner := newNode("node1", func(c *master.Config) { c.JoinURLs, c.JoinTokenFile = []string{boot.URL()}, secretFile })
	start(joiner)
	mastertest.WaitFor(t, 20*time.Second, func() bool {
		st, err := boot.Store().Stats(t.Context())
		return err == nil && len(st.Members) == 2 && st.Members[0].Voter && st.Members[1].Voter &&
			boot.Store().HTTPAddr("node1") == joiner.HTTPAdvertise()
	}, "node1 to join as a voter")
	if strings.Contains(logs.String(), string(secret)) {
		t.Fatal("the join secret is in the log")
	}

	// A restart of the bootstrap node keeps its secret.
	if err := boot.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	boot = newNode("node0", func(c *master.Config) {
		c.Bootstrap = true
		c.HTTPAddr, c.RaftAddr = boot.HTTPAddr(), boot.RaftAddr()
	})
	start(boot)
	if again, err := os.ReadFile(secretFile); err != nil || !bytes.Equal(bytes.TrimSpace(again), secret) {
		t.Fatalf("secret after restart changed: %v", err)
	}
	mastertest.WaitFor(t, 20*time.Second, func() bool { return boot.Store().Ready() && joiner.Store().Ready() }, "the cluster to recover")

	// Upgrade: node1, an existing member without a secret in its data dir
	// or config, starts and keeps serving; it wrote itself a secret.
	if err := joiner.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	joiner = newNode("node1", func(c *master.Config) {
		c.HTTPAddr, c.RaftAddr = joiner.HTTPAddr(), joiner.RaftAddr()
	})
	start(joiner)
	if _, err := os.Stat(filepath.Join(dir, "node1", master.JoinSecretFile)); err != nil {
		t.Fatalf("upgraded member wrote no secret: %v", err)
	}
	mastertest.WaitFor(t, 20*time.Second, func() bool { return joiner.Store().Ready() }, "the upgraded member to serve")
	select {
	case err := <-joiner.Err():
		t.Fatalf("upgraded member failed: %v", err)
	default:
	}
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// postJoinThroughElections posts a join to node i with the join secret and
// sends it again while it is answered 503 NO_LEADER or LEADER_LOST: on a
// loaded machine the test cluster's short raft timeouts let a leader lose
// its leadership while it probes the joining address, and the forwarding
// node then cannot tell whether the join was applied (a refused join
// changes nothing either way). At most 10 attempts.
func postJoinThroughElections(t *testing.T, c *mastertest.Cluster, i int, body string) (*http.Response, []byte) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		resp, b := postJoin(t, c.URL(i), c.JoinToken(), body)
		var e apiErr
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil ||
			(e.Code != "NO_LEADER" && e.Code != "LEADER_LOST") || attempt == 10 {
			return resp, b
		}
		t.Logf("join attempt %d: %s; again once the cluster has a leader", attempt, b)
		c.WaitConverged()
	}
}

// TestCluster_FeatureLevel: the masters register their feature level, and
// the cluster info shows it. A member registered again without a level (as
// a master of an older version registers) takes the cluster down to level
// 0; that member's master notices its record and registers its level
// again, and the cluster goes back up.
func TestCluster_FeatureLevel(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3)
	level := func(i int) (master.ClusterInfo, bool) {
		_, body := c.Get(i, "/squall/v1/cluster", c.AdminToken)
		var info master.ClusterInfo
		return info, json.Unmarshal(body, &info) == nil
	}
	atLevel := func(want int) func() bool {
		return func() bool {
			info, ok := level(c.Leader())
			if !ok || info.FeatureLevel != want {
				return false
			}
			for _, m := range info.Members {
				if want == store.FeatureLevel && m.FeatureLevel != want {
					return false
				}
			}
			return true
		}
	}
	mastertest.WaitFor(t, 10*time.Second, atLevel(store.FeatureLevel), "every member at the binary's level")

	f := c.Server(c.Followers()[0])
	old := `{"id":"` + f.ID() + `","raft_addr":"` + f.RaftAddr() + `","http_addr":"` + f.HTTPAdvertise() + `"}`
	leader := c.Leader()
	resp, body := postJoin(t, c.URL(leader), c.JoinToken(), old)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("join without a level: %d %s", resp.StatusCode, body)
	}
	// The member registers again only levelCheckMin later (or after a
	// change of leader, which an election under load may bring).
	if got := c.Server(leader).Store().MemberLevel(f.ID()); got != 0 && c.Leader() == leader {
		t.Fatalf("member level %d right after a join without level", got)
	}
	mastertest.WaitFor(t, 15*time.Second, atLevel(store.FeatureLevel), "the member's level registered again")
}
