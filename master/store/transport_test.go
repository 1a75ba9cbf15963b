package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/internal/logtest"
)

func TestTLSConfig_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		c    TLSConfig
		ok   bool
	}{
		{"none", TLSConfig{}, true},
		{"all", TLSConfig{CertFile: "c", KeyFile: "k", CAFile: "ca"}, true},
		{"no ca", TLSConfig{CertFile: "c", KeyFile: "k"}, false},
		{"only ca", TLSConfig{CAFile: "ca"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.validate(); (err == nil) != tc.ok {
				t.Fatalf("validate: %v", err)
			}
		})
	}
}

func TestStreamLayer_Advertise(t *testing.T) {
	t.Parallel()
	if _, err := newStreamLayer("0.0.0.0:0", "", TLSConfig{}, nil); err == nil || !strings.Contains(err.Error(), "advertise") {
		t.Fatalf("unspecified bind without advertise: %v", err)
	}
	l, err := newStreamLayer("0.0.0.0:0", "master-0.squall:7000", TLSConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Addr().String(); got != "master-0.squall:7000" {
		t.Fatalf("advertised %q", got)
	}
	if _, err := newStreamLayer("127.0.0.1:0", "no-port", TLSConfig{}, nil); err == nil {
		t.Fatal("advertise address without a port accepted")
	}
}

// TestCluster_MutualTLS forms a 3-node cluster over mutual TLS, then shows
// that a node whose certificate another CA signed can neither join nor
// talk to the members.
func TestCluster_MutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, certs := writeCA(t, filepath.Join(dir, "ca1"), "node0", "node1", "node2")
	nodes := newCluster(t, 3, func(i int, c *Config) {
		name := []string{"node0", "node1", "node2"}[i]
		c.TLS = TLSConfig{CertFile: certs[name][0], KeyFile: certs[name][1], CAFile: ca}
		if i == 2 {
			// Verify peers by a name shared by all masters, not by address.
			c.TLS.ServerName = "master.squall"
		}
	})
	leader := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 20*time.Second)
	idx, err := leader.ReplaceActive(ctx, treeWith("over_tls"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nodes {
		waitFor(t, 5*time.Second, func() bool { _, i := s.Active(); return i == idx }, "%s to apply", s.ID())
		if tree, _ := s.Active(); !reflect.DeepEqual(childNames(tree), []string{"over_tls"}) {
			t.Fatalf("%s: %v", s.ID(), childNames(tree))
		}
	}

	// A rogue node with a certificate from another CA.
	rogueCA, rogueCerts := writeCA(t, filepath.Join(dir, "ca2"), "rogue")
	cfg := testConfig(t, "rogue")
	cfg.TLS = TLSConfig{CertFile: rogueCerts["rogue"][0], KeyFile: rogueCerts["rogue"][1], CAFile: rogueCA}
	rogue := openStore(t, cfg)

	err = leader.Join(ctx, "rogue", rogue.Addr(), "")
	var certErr *tls.CertificateVerificationError
	if err == nil || !errors.As(err, &certErr) {
		t.Fatalf("join of a rogue node: %v, want a certificate verification error", err)
	}
	if got := memberIDs(t, leader); len(got) != 3 {
		t.Fatalf("members after refused join %v", got)
	}
	// The rogue cannot reach a member either: it does not trust the
	// member's certificate, and the member would not trust its own.
	if err := rogue.streamLayer().probe(ctx, leader.ID(), leader.Addr()); err == nil {
		t.Fatal("rogue dialled a member")
	}
	// Nothing reached it: it never learns of a leader.
	if _, _, err := rogue.WaitForLeader(ctxTimeout(t, 500*time.Millisecond)); err == nil {
		t.Fatal("rogue found a leader")
	}
	if _, err := leader.ReplaceActive(ctx, treeWith("still_fine")); err != nil {
		t.Fatal(err)
	}
}

// TestStreamLayer_SourceIP shows that with a source IP outbound raft
// connections (raft's dials and the join probe) come from it, so that a
// peer or a proxy can tell the node by it.
func TestStreamLayer_SourceIP(t *testing.T) {
	t.Parallel()
	server, err := newStreamLayer("127.0.0.1:0", "", TLSConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	client, err := newStreamLayer("127.0.0.1:0", "", TLSConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.setSource("not-an-ip"); err == nil {
		t.Fatal("a source that is no IP was accepted")
	}
	if err := client.setSource("127.0.0.2"); err != nil {
		t.Fatal(err)
	}
	for _, dial := range []struct {
		name string
		do   func() error
	}{
		{"raft dial", func() error {
			c, err := client.Dial(raft.ServerAddress(server.Addr().String()), 5*time.Second)
			if err == nil {
				err = c.Close()
			}
			return err
		}},
		{"probe", func() error {
			return client.probe(t.Context(), "server", server.Addr().String())
		}},
	} {
		if err := dial.do(); err != nil {
			t.Fatalf("%s: %v", dial.name, err)
		}
		c, err := server.Accept()
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		c.Close()
		if host != "127.0.0.2" {
			t.Fatalf("%s came from %s, want 127.0.0.2", dial.name, host)
		}
	}
}

func TestConfig_SourceIP(t *testing.T) {
	t.Parallel()
	c := Config{NodeID: "n", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", SourceIP: "127.0.0.300"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "source ip") {
		t.Fatalf("bad source ip: %v", err)
	}
	c.SourceIP = "127.0.0.2"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestStore_NoPipelinedReplication: raft replicates without its pipeline
// (see unpipelined), and writes still reach every node. The pipeline
// logs "pipelining replication" when it starts.
func TestStore_NoPipelinedReplication(t *testing.T) {
	t.Parallel()
	logs := make([]*logtest.Buffer, 3)
	nodes := newCluster(t, 3, func(i int, c *Config) {
		logs[i] = &logtest.Buffer{Max: 4 << 20}
		c.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range logs {
				t.Logf("log of node%d:\n%s", i, l.String())
			}
		}
	})
	for i := range 5 {
		err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
			_, err := l.CreateDraft(ctx, fmt.Sprintf("user%d", i))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitConverged(t, nodes)
	for i, l := range logs {
		if strings.Contains(l.String(), "pipelining replication") {
			t.Errorf("node %d replicates through raft's pipeline", i)
		}
	}
}
