package store

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/nettest"
	"github.com/squallhq/squall/internal/polltest"
)

// testLogger returns a logger whose output is printed if t fails. Records
// logged after the test ended go nowhere visible, which is harmless.
func testLogger(t testing.TB) *slog.Logger {
	tl := &logtest.Buffer{Max: 4 << 20}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", t.Name(), tl.String())
		}
	})
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig is a node on a random loopback port with short raft timeouts.
func testConfig(t testing.TB, id string) Config {
	return Config{
		NodeID:     id,
		DataDir:    filepath.Join(t.TempDir(), id),
		BindAddr:   "127.0.0.1:0",
		Logger:     testLogger(t),
		Registerer: prometheus.NewRegistry(),
		Network:    &nettest.Partition{},
		// The production raft timeouts (the defaults): shorter ones
		// (300 ms, a 150 ms lease) made leaders step down when a busy
		// 2-core machine stalled the in-process nodes.
		CommitTimeout:    10 * time.Millisecond,
		ApplyTimeout:     5 * time.Second,
		BarrierTimeout:   5 * time.Second,
		TransportTimeout: 2 * time.Second,
	}
}

// partition cuts s off the raft network (cut) or heals it.
func partition(s *Store, cut bool) {
	p := s.streamLayer().network.(*nettest.Partition)
	if cut {
		p.Cut()
	} else {
		p.Heal()
	}
}

// openStore builds and opens a store, closed when the test ends; opts
// adjust the store before it opens.
func openStore(t testing.TB, cfg Config, opts ...func(*Store)) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, o := range opts {
		o(s)
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatalf("Open %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close %s: %v", cfg.NodeID, err)
		}
	})
	return s
}

// clockAt is an option of openStore: the store's clock stands still at at.
func clockAt(at time.Time) func(*Store) {
	return func(s *Store) { s.now = func() time.Time { return at } }
}

// ctxTimeout is a context ending after d or with the test.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or d passes (polltest.Wait), what
// being formatted with args. Only for multi-node tests on real sockets,
// where no single signal says "done".
func waitFor(t testing.TB, d time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	polltest.Wait(t, fmt.Sprintf(what, args...), d, cond)
}

// waitReady waits until s is the leader and ready for consistent reads.
func waitReady(t testing.TB, s *Store) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	if _, _, err := s.WaitForLeader(ctx); err != nil {
		t.Fatalf("%s: %v", s.ID(), err)
	}
	if err := s.ConsistentRead(ctx); err != nil {
		t.Fatalf("%s: consistent read: %v", s.ID(), err)
	}
}

// openReady opens a one-node cluster of node id (it bootstraps), closed
// when the test ends, and waits until it is the leader and ready.
func openReady(t testing.TB, id string) *Store {
	t.Helper()
	cfg := testConfig(t, id)
	cfg.Bootstrap = true
	s := openStore(t, cfg)
	waitReady(t, s)
	return s
}

// reopen closes s and opens a store again on its data, config and
// address, with a fresh metrics registry and none of the options s was
// opened with: an old member restarted with this release.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	cfg := s.cfg
	cfg.BindAddr, cfg.Registerer = s.Addr(), prometheus.NewRegistry()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openStore(t, cfg)
}

// newCluster starts n nodes: node 0 bootstraps, the others join it. mod,
// if not nil, adjusts each node's config; opts adjust each store before
// it opens.
func newCluster(t testing.TB, n int, mod func(i int, c *Config), opts ...func(i int, s *Store)) []*Store {
	t.Helper()
	nodes := make([]*Store, n)
	for i := range n {
		cfg := testConfig(t, fmt.Sprintf("node%d", i))
		cfg.Bootstrap = i == 0
		if mod != nil {
			mod(i, &cfg)
		}
		nodes[i] = openStore(t, cfg, func(s *Store) {
			for _, o := range opts {
				o(i, s)
			}
		})
		if i == 0 {
			waitReady(t, nodes[0])
			continue
		}
		err := onLeader(t, nodes[:i+1], func(ctx context.Context, l *Store) error {
			return l.Join(ctx, cfg.NodeID, nodes[i].Addr(), "")
		})
		if err != nil {
			t.Fatalf("join %s: %v", cfg.NodeID, err)
		}
	}
	registerLevels(t, nodes)
	waitConverged(t, nodes)
	return nodes
}

// registerLevels records, as the masters do when they register, each
// node's feature level with an HTTP address (a placeholder: store tests
// serve no HTTP).
func registerLevels(t testing.TB, nodes []*Store) {
	t.Helper()
	for i, s := range nodes {
		err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
			return l.SetMemberLevel(ctx, s.ID(), fmt.Sprintf("127.0.0.1:%d", 10+i), s.FeatureLevel())
		})
		if err != nil {
			t.Fatalf("register %s: %v", s.ID(), err)
		}
	}
}

// waitConverged waits until every node knows the same leader, has the
// leader's state index and the leader's raft configuration (the same
// members, addresses and suffrage): a node that has not applied the
// configuration entry of a new member yet refuses that member's votes,
// and a test that cuts the leader off right then sees no election win.
func waitConverged(t testing.TB, nodes []*Store) {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool {
		var leader *Store
		for _, s := range nodes {
			if s.IsLeader() {
				leader = s
			}
		}
		if leader == nil || !leader.Ready() {
			return false
		}
		want, ok := membersOf(t, leader)
		if !ok || len(want) != len(nodes) {
			return false
		}
		for _, s := range nodes {
			if id, _ := s.Leader(); id != leader.ID() || s.Index() != leader.Index() {
				return false
			}
			if got, ok := membersOf(t, s); !ok || !slices.Equal(got, want) {
				return false
			}
		}
		return true
	}, "the cluster to converge")
}

// membersOf returns s's raft configuration as sorted "id addr suffrage"
// strings, or false if s cannot tell now.
func membersOf(t testing.TB, s *Store) ([]string, bool) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	st, err := s.Stats(ctx)
	if err != nil {
		return nil, false
	}
	var out []string
	for _, m := range st.Members {
		out = append(out, fmt.Sprintf("%s %s voter=%t", m.ID, m.Addr, m.Voter))
	}
	slices.Sort(out)
	return out, true
}

// leaderOf waits until one of nodes leads and is ready, and returns it.
func leaderOf(t testing.TB, nodes []*Store) *Store {
	t.Helper()
	var leader *Store
	waitFor(t, 10*time.Second, func() bool {
		for _, s := range nodes {
			if s.IsLeader() && s.Ready() {
				leader = s
				return true
			}
		}
		return false
	}, "a ready leader")
	return leader
}

// onLeader runs op on the ready leader of nodes, and again on the leader
// of the moment while op fails with ErrNotLeader, for up to 10s. The tests'
// raft timeouts (a 150ms leader lease, 300ms heartbeats) are shorter than
// the pauses of a busy machine under -race: a leader that misses its lease
// steps down and an election follows, at any moment (seen: "join node2:
// add non-voter: not the leader (no leader)" in 1 run of 20 at load 14).
// A client of the cluster retries on the new leader the same way (the
// master forwards to the leader it finds); op must be safe to repeat.
func onLeader(t testing.TB, nodes []*Store, op func(ctx context.Context, leader *Store) error) error {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	for {
		err := op(ctx, leaderOf(t, nodes))
		if !errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			return err
		}
		t.Logf("leadership moved (%v): again on the new leader", err)
	}
}

// backupOf returns the backup file of s, decoded.
func backupOf(t *testing.T, s *Store) (*Backup, []byte) {
	t.Helper()
	var buf bytes.Buffer
	var started *Backup
	if err := s.WriteBackup(&buf, func(b *Backup) { started = b }); err != nil {
		t.Fatal(err)
	}
	b, err := DecodeBackup(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("%v in %s", err, buf.Bytes())
	}
	if started == nil || started.Index != b.Index || !b.WithFindings {
		t.Fatalf("start %+v, backup %+v", started, b)
	}
	return b, buf.Bytes()
}

// mustHaveInstalledSnapshot fails the test unless s caught up by
// installing a snapshot (Restore) at least once.
func mustHaveInstalledSnapshot(t testing.TB, s *Store) {
	t.Helper()
	f := s.fsm.Load()
	f.mu.RLock()
	restores := f.restores
	f.mu.RUnlock()
	if restores == 0 {
		t.Fatalf("%s caught up without installing a snapshot", s.ID())
	}
}

// activeResult is what a wait for a newer active tree returned.
type activeResult struct {
	tree *config.Node
	idx  uint64
	err  error
}

// goWaitActive runs wait (fsm.waitActive or Store.WaitActive) in a
// goroutine and delivers what it returns.
func goWaitActive(wait func() (*config.Node, uint64, error)) <-chan activeResult {
	got := make(chan activeResult, 1)
	go func() {
		tree, idx, err := wait()
		got <- activeResult{tree, idx, err}
	}()
	return got
}

// mustTree decodes an export file.
func mustTree(t testing.TB, export string) *config.Node {
	t.Helper()
	ex, err := config.DecodeExport([]byte(export))
	if err != nil {
		t.Fatalf("decode tree: %v", err)
	}
	return ex.Node
}

// treeWith returns a valid tree: the root filter with one match-all child
// filter per name.
func treeWith(names ...string) *config.Node {
	root := config.NewRoot()
	for _, n := range names {
		root.Children = append(root.Children, &config.Node{Kind: config.KindFilter, Name: n, Active: true})
	}
	return root
}

// childNames lists the names of a tree's root children.
func childNames(n *config.Node) []string {
	var names []string
	for _, c := range n.Children {
		names = append(names, c.Name)
	}
	return names
}

// invalidTree fails config.Validate: a child name with a space.
func invalidTree() *config.Node { return treeWith("ok", "not valid") }

// richTree exercises operators, rules and an iterator.
const richTree = `{
  "version": "1.1",
  "Filter": {
    "name": "root",
    "filter": {"description": "", "active": true, "filter": {}},
    "nodes": [
      {"Filter": {
        "name": "master",
        "filter": {"description": "tenant", "active": true,
          "filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "master"}},
        "nodes": [
          {"Iterator": {
            "name": "alerts",
            "iterator": {"description": "", "active": true, "target": "${event.payload.alerts}"},
            "nodes": [
              {"Ruleset": {"name": "per_alert", "rules": [
                {"name": "r1", "description": "", "continue": true, "active": true,
                 "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": 1000}, "WITH": {}},
                 "actions": [{"id": "logger", "payload": {"n": "${event.iterator.item}"}}]}
              ]}}
            ]
          }}
        ]
      }}
    ]
  }
}`

// writeCA makes a CA and, for each name, a certificate it signs valid for
// 127.0.0.1 and the DNS name master.squall, usable as server and client.
// It returns the CA file and the cert and key files per name.
func writeCA(t testing.TB, dir string, names ...string) (caFile string, certs map[string][2]string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		must(os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	must(os.MkdirAll(dir, 0o700))
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "squall test CA " + dir},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDER)
	must(err)
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	certs = map[string][2]string{}
	for i, name := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:     []string{"master.squall"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		must(err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		must(err)
		certs[name] = [2]string{write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)}
	}
	return caFile, certs
}
