package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// others returns nodes without s.
func others(nodes []*Store, s *Store) []*Store {
	var out []*Store
	for _, n := range nodes {
		if n != s {
			out = append(out, n)
		}
	}
	return out
}

func memberIDs(t testing.TB, s *Store) []string {
	t.Helper()
	st, err := s.Stats(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range st.Members {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestCluster_Replication(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil)
	leader := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 20*time.Second)

	id, err := leader.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.EditDraft(ctx, id, "alice", treeWith("a", "b")); err != nil {
		t.Fatal(err)
	}
	deployed, err := leader.Deploy(ctx, id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nodes {
		waitFor(t, 5*time.Second, func() bool { _, idx := s.Active(); return idx == deployed }, "%s to apply the deploy", s.ID())
		tree, _ := s.Active()
		d, err := s.Draft()
		if !reflect.DeepEqual(childNames(tree), []string{"a", "b"}) || err != nil || d.ID != id || d.Owner != "alice" {
			t.Fatalf("%s: active %v, draft %+v %v", s.ID(), childNames(tree), d, err)
		}
	}

	for _, f := range others(nodes, leader) {
		// Writes and consistent reads on a follower name the leader.
		var nle *NotLeaderError
		if _, err := f.ReplaceActive(ctx, treeWith("x")); !errors.As(err, &nle) || nle.LeaderAddr != leader.Addr() || nle.LeaderID != leader.ID() {
			t.Fatalf("write on follower %s: %v", f.ID(), err)
		}
		if err := f.ConsistentRead(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("consistent read on follower %s: %v", f.ID(), err)
		}
		if err := f.Join(ctx, "n9", "127.0.0.1:1", ""); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("join on follower: %v", err)
		}
		if id, addr, err := f.WaitForLeader(ctx); err != nil || id != leader.ID() || addr != leader.Addr() {
			t.Fatalf("follower %s sees leader %s %s %v", f.ID(), id, addr, err)
		}
	}
	if err := leader.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"node0", "node1", "node2"}
	for _, s := range nodes {
		if got := memberIDs(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s members %v", s.ID(), got)
		}
	}

	// Joining again is a no-op; an unreachable node is refused.
	f := others(nodes, leader)[0]
	if err := leader.Join(ctx, f.ID(), f.Addr(), ""); err != nil {
		t.Fatalf("re-join: %v", err)
	}
	if err := leader.Join(ctx, "ghost", "127.0.0.1:1", ""); err == nil {
		t.Fatal("join of an unreachable node succeeded")
	}

	// Remove a follower: the others go on committing.
	if err := leader.Remove(ctx, f.ID()); err != nil {
		t.Fatal(err)
	}
	if err := leader.Remove(ctx, "ghost"); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("remove unknown: %v", err)
	}
	if got := memberIDs(t, leader); slices.Contains(got, f.ID()) || len(got) != 2 {
		t.Fatalf("members after remove %v", got)
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("after_remove")); err != nil {
		t.Fatal(err)
	}
}

// TestCluster_LeaderFailover kills the leader while a writer streams
// writes: every acknowledged write must be in the new leader's state, and a
// new leader must serve within seconds.
func TestCluster_LeaderFailover(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil)
	ctx := ctxTimeout(t, 30*time.Second)

	// Each write replaces the active tree with every acknowledged name so
	// far plus its own, so the final tree must hold every acknowledged name.
	type ack struct {
		name string
		by   *Store
		at   time.Time
	}
	var (
		acks    []ack // written by the writer only, read after it is done
		unknown int
	)
	halfway := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		retry := time.NewTicker(5 * time.Millisecond)
		defer retry.Stop()
		for i := 0; len(acks) < 80; i++ {
			if ctx.Err() != nil {
				done <- fmt.Errorf("only %d writes acknowledged: %w", len(acks), ctx.Err())
				return
			}
			var target *Store
			for _, s := range nodes {
				if s.IsLeader() { // false once closed
					target = s
				}
			}
			if target == nil {
				<-retry.C // election under way
				continue
			}
			names := []string{fmt.Sprintf("w%d", i)}
			for _, a := range acks {
				names = append(names, a.name)
			}
			_, err := target.ReplaceActive(ctx, treeWith(names...))
			switch {
			case err == nil:
				acks = append(acks, ack{names[0], target, time.Now()})
				if len(acks) == 40 {
					close(halfway)
				}
			case errors.Is(err, ErrNotLeader), errors.Is(err, ErrTimeout), errors.Is(err, ErrClosed):
				if errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrClosed) {
					unknown++
				}
				<-retry.C
			default:
				done <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()

	<-halfway
	old := leaderOf(t, nodes)
	killed := time.Now()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var failover time.Duration
	for _, a := range acks {
		if a.by != old {
			failover = a.at.Sub(killed)
			break
		}
	}
	t.Logf("failover: the new leader acknowledged its first write %s after the kill (%d writes of unknown outcome)", failover, unknown)
	if failover <= 0 || failover > 5*time.Second {
		t.Errorf("failover took %s", failover)
	}

	alive := others(nodes, old)
	newLeader := leaderOf(t, alive)
	if err := newLeader.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range alive {
		waitFor(t, 5*time.Second, func() bool { return s.Index() == newLeader.Index() }, "%s to catch up", s.ID())
		tree, _ := s.Active()
		got := childNames(tree)
		for _, a := range acks {
			if !slices.Contains(got, a.name) {
				t.Fatalf("%s lost acknowledged write %s; has %v", s.ID(), a.name, got)
			}
		}
	}
}

// TestCluster_Restart stops every node and starts them again from their
// data dirs: state and membership survive.
func TestCluster_Restart(t *testing.T) {
	t.Parallel()
	var cfgs []Config
	nodes := newCluster(t, 3, func(i int, c *Config) { cfgs = append(cfgs, *c) })
	leader := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	id, err := leader.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.EditDraft(ctx, id, "alice", treeWith("kept")); err != nil {
		t.Fatal(err)
	}
	deployed, err := leader.Deploy(ctx, id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	waitConverged(t, nodes)
	for i, s := range nodes {
		// Restart on the same address: it is in the raft configuration.
		cfgs[i].BindAddr = s.Addr()
		cfgs[i].Registerer = prometheus.NewRegistry()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	restarted := make([]*Store, len(nodes))
	for i := range nodes {
		restarted[i] = openStore(t, cfgs[i])
	}
	leader = leaderOf(t, restarted)
	waitConverged(t, restarted)
	for _, s := range restarted {
		tree, idx := s.Active()
		if idx != deployed || !reflect.DeepEqual(childNames(tree), []string{"kept"}) {
			t.Fatalf("%s after restart: %v at %d", s.ID(), childNames(tree), idx)
		}
		if d, err := s.Draft(); err != nil || d.ID != id {
			t.Fatalf("%s draft %+v %v", s.ID(), d, err)
		}
		if got := memberIDs(t, s); !reflect.DeepEqual(got, []string{"node0", "node1", "node2"}) {
			t.Fatalf("%s members %v", s.ID(), got)
		}
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("after_restart")); err != nil {
		t.Fatal(err)
	}
}

// TestCluster_JoinFromSnapshot adds nodes after the leader snapshotted and
// truncated its log: they catch up by installing the snapshot.
func TestCluster_JoinFromSnapshot(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		joinFromSnapshot(t, false)
	})
	// Over raft mutual TLS the snapshot goes through the check of the
	// sender's identity (identityConn), which passes its data on as is.
	t.Run("mutual TLS", func(t *testing.T) {
		t.Parallel()
		joinFromSnapshot(t, true)
	})
}

func joinFromSnapshot(t *testing.T, mutualTLS bool) {
	var ca string
	var certs map[string][2]string
	if mutualTLS {
		ca, certs = writeCA(t, filepath.Join(t.TempDir(), "ca"), "node0", "node1", "node2")
	}
	small := func(_ int, c *Config) {
		c.TrailingLogs = 2
		c.SnapshotThreshold = 16
		if mutualTLS {
			c.TLS = TLSConfig{CertFile: certs[c.NodeID][0], KeyFile: certs[c.NodeID][1], CAFile: ca}
		}
	}
	nodes := newCluster(t, 1, small)
	leader := nodes[0]
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range 30 {
		if _, err := leader.ReplaceActive(ctx, treeWith(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	id, err := leader.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := leader.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= 1 {
		t.Fatalf("log not truncated: first index %d", first)
	}

	for i := 1; i <= 2; i++ {
		cfg := testConfig(t, fmt.Sprintf("node%d", i))
		small(i, &cfg)
		s := openStore(t, cfg)
		if err := leader.Join(ctx, cfg.NodeID, s.Addr(), ""); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, s)
	}
	waitConverged(t, nodes)
	wantTree, wantIdx := leader.Active()
	for _, s := range nodes[1:] {
		mustHaveInstalledSnapshot(t, s)
		tree, idx := s.Active()
		if idx != wantIdx || !reflect.DeepEqual(childNames(tree), childNames(wantTree)) {
			t.Fatalf("%s: %v at %d, want %v at %d", s.ID(), childNames(tree), idx, childNames(wantTree), wantIdx)
		}
		if d, err := s.Draft(); err != nil || d.ID != id {
			t.Fatalf("%s draft %+v %v", s.ID(), d, err)
		}
	}
	// And they keep up with new writes through the log.
	idx, err := leader.ReplaceActive(ctx, treeWith("after_join"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nodes {
		waitFor(t, 5*time.Second, func() bool { _, i := s.Active(); return i == idx }, "%s to apply", s.ID())
	}
}

// TestCluster_Partition cuts the leader off: it cannot commit, the majority
// elects a new leader and goes on, and the old leader catches up after the
// partition heals.
func TestCluster_Partition(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil)
	var old *Store // the leader that wrote "before", cut off next
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		old = l
		_, err := l.ReplaceActive(ctx, treeWith("before"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	majority := others(nodes, old)
	ctx := ctxTimeout(t, 30*time.Second)

	partition(old, true)
	// The minority side cannot commit: the write fails (the leader steps
	// down when its lease runs out) instead of hanging.
	if _, err := old.ReplaceActive(ctxTimeout(t, 10*time.Second), treeWith("minority")); !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("write on the cut-off leader: %v", err)
	}
	// The two nodes left elect a leader; on a busy machine they may elect
	// again before the write commits.
	var idx uint64
	err = onLeader(t, majority, func(ctx context.Context, l *Store) error {
		var err error
		idx, err = l.ReplaceActive(ctx, treeWith("majority"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.ConsistentRead(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("consistent read on the cut-off node: %v", err)
	}

	partition(old, false)
	waitConverged(t, nodes)
	for _, s := range nodes {
		tree, i := s.Active()
		if i != idx || !reflect.DeepEqual(childNames(tree), []string{"majority"}) {
			t.Fatalf("%s after healing: %v at %d, want majority at %d", s.ID(), childNames(tree), i, idx)
		}
	}
}
