package store

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/internal/nettest"
)

// unchangedByJoin fails the test unless a refused join of node id left
// the members as they were (before) and id's HTTP address at httpAddr
// ("" for a node that was no member).
func unchangedByJoin(t *testing.T, leader *Store, id string, before []string, httpAddr string) {
	t.Helper()
	if got, _ := membersOf(t, leader); !slices.Equal(got, before) {
		t.Fatalf("members after the refused join of %s %v, want %v", id, got, before)
	}
	if got := leader.HTTPAddr(id); got != httpAddr {
		t.Fatalf("HTTP address of %s after the refused join %q, want %q", id, got, httpAddr)
	}
}

// TestStore_JoinSilentListener: an address that accepts TCP but does not
// speak raft never enters the configuration, and the cluster keeps
// committing writes. Before Join required a raft answer, it became a
// voter and a one-node cluster lost its quorum for good.
func TestStore_JoinSilentListener(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, func(_ int, c *Config) { c.TransportTimeout = 500 * time.Millisecond })
	leader := nodes[0]
	before, _ := membersOf(t, leader)
	rogue := nettest.SilentListener(t)

	ctx := ctxTimeout(t, 20*time.Second)
	err := leader.Join(ctx, "rogue", rogue, "127.0.0.1:9")
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("join of a silent listener: %v, want ErrUnreachable", err)
	}
	unchangedByJoin(t, leader, "rogue", before, "")
	wctx := ctxTimeout(t, 3*time.Second)
	if _, err := leader.ReplaceActive(wctx, treeWith("still_writing")); err != nil {
		t.Fatalf("write after the refused join: %v", err)
	}
}

// TestStore_JoinEntersAsNonvoter: a new member is in the configuration as
// a non-voter before it is a voter, as the leader's raft log shows, and
// ends a voter with its HTTP address recorded.
func TestStore_JoinEntersAsNonvoter(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, nil)
	leader := nodes[0]
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := leader.ReplaceActive(ctx, treeWith("before_join")); err != nil {
		t.Fatal(err)
	}
	joiner := openStore(t, testConfig(t, "node1"))
	if err := leader.Join(ctx, "node1", joiner.Addr(), "127.0.0.1:8081"); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, []*Store{leader, joiner})
	if got := leader.HTTPAddr("node1"); got != "127.0.0.1:8081" {
		t.Fatalf("HTTP address %q", got)
	}

	// The configurations in the leader's log, in order, as node1's suffrage.
	first, err := leader.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := leader.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := leader.logs.GetLog(i, &l); err != nil || l.Type != raft.LogConfiguration {
			continue
		}
		for _, srv := range raft.DecodeConfiguration(l.Data).Servers {
			if srv.ID == "node1" {
				seen = append(seen, srv.Suffrage.String())
			}
		}
	}
	if want := []string{"Nonvoter", "Voter"}; !slices.Equal(seen, want) {
		t.Fatalf("node1's suffrage in the leader's log %v, want %v", seen, want)
	}
	// The joiner had applied the state before it could vote.
	if _, idx := joiner.Active(); idx == 0 {
		t.Fatal("joiner has not applied the state")
	}
}

// TestStore_JoinMovedMember: a known member's addresses change only
// through a join whose new raft address answers as raft; a join to an
// unreachable or silent address leaves the configuration and the HTTP
// address as they were.
func TestStore_JoinMovedMember(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, func(_ int, c *Config) { c.TransportTimeout = 500 * time.Millisecond })
	leader := leaderOf(t, nodes)
	f := others(nodes, leader)[0]
	ctx := ctxTimeout(t, 30*time.Second)
	if err := leader.Join(ctx, f.ID(), f.Addr(), "127.0.0.1:5"); err != nil {
		t.Fatal(err)
	}
	before, _ := membersOf(t, leader)
	for _, addr := range []string{"127.0.0.1:1", nettest.SilentListener(t)} {
		err := leader.Join(ctx, f.ID(), addr, "127.0.0.1:6")
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("move %s to %s: %v, want ErrUnreachable", f.ID(), addr, err)
		}
		unchangedByJoin(t, leader, f.ID(), before, "127.0.0.1:5")
	}
	// The member itself, at its raft address, changes its HTTP address.
	if err := leader.Join(ctx, f.ID(), f.Addr(), "127.0.0.1:6"); err != nil {
		t.Fatal(err)
	}
	if got := leader.HTTPAddr(f.ID()); got != "127.0.0.1:6" {
		t.Fatalf("HTTP address %q, want 127.0.0.1:6", got)
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("after")); err != nil {
		t.Fatal(err)
	}
}

// TestCluster_MutualTLSIdentity: with raft mutual TLS, a node whose
// certificate the cluster's CA signed for another node id cannot join
// under its own id; with its own certificate it can.
func TestCluster_MutualTLSIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, certs := writeCA(t, filepath.Join(dir, "ca"), "node0", "node1")
	tlsOf := func(name string) TLSConfig {
		return TLSConfig{CertFile: certs[name][0], KeyFile: certs[name][1], CAFile: ca}
	}
	nodes := newCluster(t, 1, func(_ int, c *Config) { c.TLS = tlsOf("node0") })
	leader := nodes[0]
	before, _ := membersOf(t, leader)
	ctx := ctxTimeout(t, 20*time.Second)

	// The address joining as node2 presents node1's certificate: signed
	// by the CA, not node2's. (A store refuses to run as node2 with it:
	// TestStore_OwnCertificateNamesNode.)
	cfg := testConfig(t, "node1")
	cfg.TLS = tlsOf("node1")
	impostor := openStore(t, cfg)
	err := leader.Join(ctx, "node2", impostor.Addr(), "127.0.0.1:9")
	if !errors.Is(err, ErrIdentity) {
		t.Fatalf("join with another node's certificate: %v, want ErrIdentity", err)
	}
	unchangedByJoin(t, leader, "node2", before, "")
	// The certificate names node1: node1 joins with it.
	cfg = testConfig(t, "node1")
	cfg.TLS = tlsOf("node1")
	node1 := openStore(t, cfg)
	if err := leader.Join(ctx, "node1", node1.Addr(), "127.0.0.1:8"); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, []*Store{leader, node1})
}

func TestNamesNode(t *testing.T) {
	t.Parallel()
	cert := func(cn string, dns ...string) []*x509.Certificate {
		return []*x509.Certificate{{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}}
	}
	for _, tc := range []struct {
		name  string
		certs []*x509.Certificate
		want  bool
	}{
		{"common name", cert("node1"), true},
		{"DNS name", cert("master", "node0", "node1"), true},
		{"other node", cert("node2", "node3"), false},
		{"prefix only", cert("node10"), false},
		{"no certificate", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := namesNode(tc.certs, "node1"); got != tc.want {
				t.Fatalf("namesNode = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHasState tells a fresh data dir from one with raft state.
func TestHasState(t *testing.T) {
	t.Parallel()
	if has, err := HasState(filepath.Join(t.TempDir(), "none")); has || err != nil {
		t.Fatalf("missing dir: %v %v", has, err)
	}
	cfg := testConfig(t, "node0")
	cfg.Bootstrap = true
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if has, err := HasState(cfg.DataDir); !has || err != nil {
		t.Fatalf("bootstrapped dir: %v %v", has, err)
	}
	// A node that opened its store but never joined has no state.
	fresh := testConfig(t, "node1")
	s, err = New(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if has, err := HasState(fresh.DataDir); has || err != nil {
		t.Fatalf("never joined: %v %v", has, err)
	}
}

// laggard is a node that speaks raft on a real raft transport but never
// catches up: it answers every AppendEntries, heartbeats included, with
// success and an empty log, and refuses everything else.
func laggard(t testing.TB) string {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case rpc := <-trans.Consumer():
				switch req := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: 0, Success: true}, nil)
				default:
					rpc.Respond(nil, errors.New("laggard: not supported"))
				}
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		trans.Close()
	})
	return string(trans.LocalAddr())
}

// TestStore_JoinNotCaughtUp: a node that answers raft but does not catch
// up within CatchUpTimeout is a non-voter for that time only: it is
// removed again, never becomes a voter, gets no HTTP address, and the
// cluster keeps committing.
func TestStore_JoinNotCaughtUp(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, func(_ int, c *Config) { c.CatchUpTimeout = 500 * time.Millisecond })
	leader := nodes[0]
	before, _ := membersOf(t, leader)
	addr := laggard(t)

	ctx := ctxTimeout(t, 20*time.Second)
	err := leader.Join(ctx, "laggard", addr, "127.0.0.1:9")
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("join of a node that does not catch up: %v, want ErrUnreachable", err)
	}
	unchangedByJoin(t, leader, "laggard", before, "")
	last, err := leader.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if err := leader.logs.GetLog(i, &l); err != nil || l.Type != raft.LogConfiguration {
			continue
		}
		s := "absent"
		for _, srv := range raft.DecodeConfiguration(l.Data).Servers {
			if srv.ID == "laggard" {
				s = srv.Suffrage.String()
			}
		}
		seen = append(seen, s)
	}
	if want := []string{"absent", "Nonvoter", "absent"}; !slices.Equal(seen, want) {
		t.Fatalf("laggard in the leader's configurations %v, want %v", seen, want)
	}
	if _, err := leader.ReplaceActive(ctxTimeout(t, 3*time.Second), treeWith("still_writing")); err != nil {
		t.Fatalf("write after the failed join: %v", err)
	}
}
