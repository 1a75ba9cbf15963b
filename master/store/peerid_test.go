package store

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestCluster_RaftPeerIdentity: with raft mutual TLS, a peer holding a
// valid cluster certificate can speak on a raft connection only as the
// node its certificate names. An impostor with node2's certificate (or
// with one for a node that is no member) sends the followers
// AppendEntries in the leader's name with a far higher term, and a vote
// request in another member's name: each is refused before raft reads it,
// and the cluster's term and leader stay. An RPC in its own name gets an
// answer (raft refuses the vote: it is not the candidate's turn).
func TestCluster_RaftPeerIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, certs := writeCA(t, filepath.Join(dir, "ca"), "node0", "node1", "node2", "outsider")
	tlsOf := func(name string) TLSConfig {
		return TLSConfig{CertFile: certs[name][0], KeyFile: certs[name][1], CAFile: ca}
	}
	nodes := newCluster(t, 3, func(i int, c *Config) { c.TLS = tlsOf([]string{"node0", "node1", "node2"}[i]) })
	leader := leaderOf(t, nodes)
	before, err := leader.Stats(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	for _, holder := range []string{"node2", "outsider"} {
		// The impostor speaks raft's protocol with raft's own transport,
		// over a stream layer that presents holder's certificate.
		layer, err := newStreamLayer("127.0.0.1:0", "", tlsOf(holder), nil)
		if err != nil {
			t.Fatal(err)
		}
		trans := raft.NewNetworkTransport(layer, 1, 5*time.Second, io.Discard)
		for _, s := range others(nodes, leader) {
			if s.ID() == holder {
				continue
			}
			as := func(id string) raft.RPCHeader {
				return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(leader.Addr())}
			}
			var resp raft.AppendEntriesResponse
			err := trans.AppendEntries(raft.ServerID(s.ID()), raft.ServerAddress(s.Addr()),
				&raft.AppendEntriesRequest{RPCHeader: as(leader.ID()), Term: before.Term + 100}, &resp)
			if err == nil {
				t.Errorf("%s's certificate: AppendEntries to %s in the leader's name (%s) answered %+v", holder, s.ID(), leader.ID(), resp)
			}
			var vote raft.RequestVoteResponse
			other := others(nodes, s)[0].ID()
			if err := trans.RequestVote(raft.ServerID(s.ID()), raft.ServerAddress(s.Addr()),
				&raft.RequestVoteRequest{RPCHeader: as(other), Term: before.Term + 100, LastLogIndex: 1 << 40, LastLogTerm: before.Term + 99}, &vote); err == nil {
				t.Errorf("%s's certificate: a vote request to %s in %s's name answered %+v", holder, s.ID(), other, vote)
			}
			if err := trans.RequestVote(raft.ServerID(s.ID()), raft.ServerAddress(s.Addr()),
				&raft.RequestVoteRequest{RPCHeader: as(holder), Term: 1}, &vote); err != nil {
				t.Errorf("%s's certificate: a vote request in its own name: %v, want an answer", holder, err)
			} else if vote.Granted {
				t.Errorf("%s's certificate: vote granted", holder)
			}
		}
		if err := trans.Close(); err != nil {
			t.Error(err)
		}
	}

	after, err := leader.Stats(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if after.Term != before.Term || after.LeaderID != before.LeaderID {
		t.Fatalf("term %d leader %s after the impostors, was term %d leader %s", after.Term, after.LeaderID, before.Term, before.LeaderID)
	}
	for _, s := range nodes {
		if l, _ := s.Leader(); l != before.LeaderID {
			t.Errorf("%s follows %q, want %s", s.ID(), l, before.LeaderID)
		}
	}
	if _, err := leader.ReplaceActive(ctxTimeout(t, 10*time.Second), treeWith("still_one_cluster")); err != nil {
		t.Fatal(err)
	}
}

// TestStreamLayer_DialChecksIdentity: raft's dial to a member's address
// needs a certificate that names the member, not just one the CA signed.
func TestStreamLayer_DialChecksIdentity(t *testing.T) {
	t.Parallel()
	ca, certs := writeCA(t, t.TempDir(), "node0", "node1", "node2")
	tlsOf := func(name string) TLSConfig {
		return TLSConfig{CertFile: certs[name][0], KeyFile: certs[name][1], CAFile: ca}
	}
	dialer, err := newStreamLayer("127.0.0.1:0", "", tlsOf("node0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()
	for _, tc := range []struct {
		holder string // whose certificate the address presents
		ok     bool
	}{{"node1", true}, {"node2", false}} {
		ln, err := newStreamLayer("127.0.0.1:0", "", tlsOf(tc.holder), nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					_, _ = io.Copy(io.Discard, c) // runs the handshake
					c.Close()
				}()
			}
		}()
		addr := raft.ServerAddress(ln.Addr().String())
		dialer.expect(addr, "node1")
		c, err := dialer.Dial(addr, 5*time.Second)
		switch {
		case tc.ok && err != nil:
			t.Errorf("dial of node1 presenting %s's certificate: %v", tc.holder, err)
		case !tc.ok && !errors.Is(err, errPeerIdentity):
			t.Errorf("dial of node1 presenting %s's certificate: %v, want errPeerIdentity", tc.holder, err)
		case !tc.ok && !strings.Contains(err.Error(), `"node2"`):
			t.Errorf("error %q does not name the certificate's node", err)
		}
		if c != nil {
			c.Close()
		}
		ln.Close()
	}
}

// TestStore_OwnCertificateNamesNode: a master whose raft certificate does
// not name its node id refuses to start, saying so, rather than start and
// see every peer refuse its RPCs.
func TestStore_OwnCertificateNamesNode(t *testing.T) {
	t.Parallel()
	ca, certs := writeCA(t, t.TempDir(), "node0", "node1")
	cfg := testConfig(t, "node0")
	cfg.TLS = TLSConfig{CertFile: certs["node1"][0], KeyFile: certs["node1"][1], CAFile: ca}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Open(t.Context())
	if err == nil {
		s.Close()
		t.Fatal("a store opened with node1's certificate as node0")
	}
	if !strings.Contains(err.Error(), `not node "node0"`) {
		t.Errorf("error %q does not say whose certificate it is", err)
	}
}
