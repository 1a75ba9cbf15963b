package mastertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/internal/nettest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// Cluster is a running test cluster. Nodes are numbered from 0 in the
// order they were started; a killed node keeps its number and data dir.
type Cluster struct {
	// AdminToken is a bearer token with admin on root.
	AdminToken string

	t         testing.TB
	dir       string
	signer    *auth.Signer
	keyFile   string
	joinToken string
	joinFile  string
	opts      options

	mu    sync.Mutex
	nodes []*node
}

// node is one member, running or not.
type node struct {
	cfg     master.Config
	srv     *master.Server
	reg     *prometheus.Registry
	sw      *nettest.Partition
	log     *logtest.Buffer
	running bool
	cut     bool
	// hold keeps the ports of a stopped node bound until it restarts.
	hold *portHold
}

// portHold keeps a stopped node's ports bound so that nothing else takes
// them before the node restarts on them: a node's raft address is its
// identity in the cluster, and tests of other packages, running in other
// processes at the same time, bind free ports too (one took a killed
// node's raft port, so the node could not restart and the other test's
// node received this cluster's raft traffic). Connections are accepted
// and closed at once, as a refused one would be.
type portHold struct {
	lns []net.Listener
	wg  sync.WaitGroup
}

// holdPorts binds addrs; an address it cannot bind is left out.
func holdPorts(addrs ...string) *portHold {
	h := &portHold{}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			continue
		}
		h.lns = append(h.lns, ln)
		h.wg.Go(func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		})
	}
	return h
}

// release frees the ports.
func (h *portHold) release() {
	if h == nil {
		return
	}
	for _, ln := range h.lns {
		ln.Close()
	}
	h.wg.Wait()
}

// Option adjusts a test cluster.
type Option func(*options)

type options struct {
	config []func(i int, c *master.Config)
	setup  []func(i int, s *master.Server)
}

// WithConfig adjusts node i's config before each start, e.g. its
// timeouts or master.Config.StoreOptions.
func WithConfig(fn func(i int, c *master.Config)) Option {
	return func(o *options) { o.config = append(o.config, fn) }
}

// WithStore adjusts every node's store config after the test cluster's
// own settings (master.Config.StoreOptions), e.g. to fsync as in
// production or to set raft's timeouts.
func WithStore(fn func(c *store.Config)) Option {
	return WithConfig(func(_ int, c *master.Config) {
		prev := c.StoreOptions
		c.StoreOptions = func(sc *store.Config) {
			if prev != nil {
				prev(sc)
			}
			fn(sc)
		}
	})
}

// WithSetup runs on node i's server after New and before Start, on every
// start (restarts too): the place to Mount API routes.
func WithSetup(fn func(i int, s *master.Server)) Option {
	return func(o *options) { o.setup = append(o.setup, fn) }
}

// Test timing: the production raft timeouts (store's defaults). Shorter
// ones (300 ms and a 150 ms lease) made leaders step down when a busy
// 2-core machine running the race detector stalled the three in-process
// nodes for a moment, and tests that do not kill leaders then failed with
// 503s.
const (
	heartbeat = store.DefaultHeartbeatTimeout
	election  = store.DefaultElectionTimeout
	lease     = store.DefaultLeaderLeaseTimeout
	// Timeout bounds the waits of the helpers (a leader, convergence).
	Timeout = 15 * time.Second
)

// TestCluster starts n nodes and waits until they form one cluster: node
// 0 bootstraps, the others join it through its HTTP API, and every node
// knows the leader and every member's HTTP address.
func TestCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("mastertest: cluster of %d nodes", n)
	}
	c := &Cluster{t: t, dir: t.TempDir()}
	for _, o := range opts {
		o(&c.opts)
	}
	key := make([]byte, 32)
	joinKey := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(joinKey); err != nil {
		t.Fatal(err)
	}
	c.keyFile = filepath.Join(c.dir, "token.key")
	c.joinFile = filepath.Join(c.dir, "join.token")
	c.joinToken = hex.EncodeToString(joinKey)
	hexKey := []byte(hex.EncodeToString(key))
	if err := os.WriteFile(c.keyFile, hexKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.joinFile, []byte(c.joinToken), 0o600); err != nil {
		t.Fatal(err)
	}
	c.signer = &auth.Signer{HMACKey: hexKey}
	c.AdminToken = c.Token(auth.Claims{User: "admin", Auths: map[string]auth.Authorization{
		"root": {Path: []string{"root"}, Roles: []string{string(auth.Admin)}},
	}})
	t.Cleanup(c.stopAll)

	c.start(c.newNode(0, true))
	c.waitFor(Timeout, func() bool {
		s := c.Server(0)
		return s.Store().IsLeader() && s.Store().Ready() && s.Store().HTTPAddr(s.ID()) != ""
	}, "node 0 to lead and register")
	for i := 1; i < n; i++ {
		c.Add()
	}
	c.WaitConverged()
	return c
}

// newNode makes the config of node i and appends it.
func (c *Cluster) newNode(i int, bootstrap bool) *node {
	cfg := master.Default()
	cfg.NodeID = fmt.Sprintf("node%d", i)
	cfg.DataDir = filepath.Join(c.dir, cfg.NodeID)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Bootstrap = bootstrap
	cfg.TokenHMACKeyFile = c.keyFile
	cfg.JoinTokenFile = c.joinFile
	cfg.ShutdownTimeout = 5 * time.Second
	if !bootstrap {
		cfg.JoinURLs = []string{c.URL(0)}
		if running := c.running(); len(running) > 0 {
			cfg.JoinURLs = []string{c.URL(running[0])}
		}
	}
	nd := &node{cfg: cfg, sw: &nettest.Partition{}, log: &logtest.Buffer{Max: 4 << 20}}
	c.mu.Lock()
	c.nodes = append(c.nodes, nd)
	c.mu.Unlock()
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("log of %s:\n%s", cfg.NodeID, nd.log.String())
		}
	})
	return nd
}

// start builds and starts the node's server with a fresh registry.
func (c *Cluster) start(nd *node) {
	c.t.Helper()
	c.mu.Lock()
	nd.hold.release()
	nd.hold = nil
	cfg := nd.cfg
	c.mu.Unlock()
	i := c.index(nd)
	sw := nd.sw
	cfg.StoreOptions = func(sc *store.Config) {
		sc.HeartbeatTimeout = heartbeat
		sc.ElectionTimeout = election
		sc.LeaderLeaseTimeout = lease
		sc.CommitTimeout = 10 * time.Millisecond
		sc.ApplyTimeout = 5 * time.Second
		sc.BarrierTimeout = 5 * time.Second
		sc.TransportTimeout = 2 * time.Second
		sc.NoSync = true
		sc.Network = sw
	}
	cfg.Logger = slog.New(slog.NewTextHandler(nd.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, fn := range c.opts.config {
		fn(i, &cfg)
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	srv, err := master.New(cfg)
	if err != nil {
		c.t.Fatalf("mastertest: node %d: %v", i, err)
	}
	for _, fn := range c.opts.setup {
		fn(i, srv)
	}
	if err := srv.Start(c.t.Context()); err != nil {
		_ = srv.Shutdown(c.t.Context())
		c.t.Fatalf("mastertest: start node %d: %v", i, err)
	}
	c.mu.Lock()
	nd.srv, nd.reg, nd.running = srv, reg, true
	// A restart binds the same ports: raft and the other nodes know them.
	nd.cfg.HTTPAddr = srv.HTTPAddr()
	nd.cfg.RaftAddr = srv.RaftAddr()
	nd.cfg.DataDir = cfg.DataDir
	c.mu.Unlock()
}

func (c *Cluster) index(nd *node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Index(c.nodes, nd)
}

func (c *Cluster) node(i int) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.nodes) {
		c.t.Fatalf("mastertest: no node %d", i)
	}
	return c.nodes[i]
}

// Len returns the number of nodes, running or not.
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// running returns the indexes of the running nodes.
func (c *Cluster) running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, nd := range c.nodes {
		if nd.running {
			out = append(out, i)
		}
	}
	return out
}

// Running returns the indexes of the running nodes.
func (c *Cluster) Running() []int { return c.running() }

// Add starts a new node that joins the cluster through a running node,
// and returns its index. It does not wait for the node to catch up.
func (c *Cluster) Add() int {
	c.t.Helper()
	nd := c.newNode(c.Len(), false)
	c.start(nd)
	return c.index(nd)
}

// Server returns node i's server (the latest one after a restart).
func (c *Cluster) Server(i int) *master.Server {
	nd := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.srv
}

// Registry returns the metrics registry of node i's current server.
func (c *Cluster) Registry(i int) *prometheus.Registry {
	nd := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.reg
}

// Snapshot has every running node snapshot its state: a node that
// restarts, or lags, then catches up from one.
func (c *Cluster) Snapshot(t testing.TB) {
	t.Helper()
	for _, i := range c.Running() {
		if err := c.Server(i).Store().Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// Counter returns the value of node i's counter name, summed over its
// series (0 when it has none).
func (c *Cluster) Counter(t testing.TB, i int, name string) float64 {
	t.Helper()
	return metrictest.Sum(t, c.Registry(i), name, nil)
}

// URL returns the base URL of node i's HTTP API (it survives restarts).
func (c *Cluster) URL(i int) string { return "http://" + c.node(i).cfg.HTTPAddr }

// DataDir returns node i's data directory (it survives restarts).
func (c *Cluster) DataDir(i int) string { return c.node(i).cfg.DataDir }

// Log returns what node i logged (every level, text lines; the oldest
// half dropped past 4 MiB).
func (c *Cluster) Log(i int) string { return c.node(i).log.String() }

// JoinToken returns the cluster's join secret.
func (c *Cluster) JoinToken() string { return c.joinToken }

// Token mints an HS256 token with the claims, valid for an hour.
func (c *Cluster) Token(claims auth.Claims) string {
	tok, err := c.signer.Sign(claims, time.Hour)
	if err != nil {
		c.t.Fatalf("mastertest: sign token: %v", err)
	}
	return tok
}

// Leader waits until one running node leads, is ready for consistent
// reads and has its HTTP address registered, and returns its index.
func (c *Cluster) Leader() int {
	c.t.Helper()
	leader := -1
	c.waitFor(Timeout, func() bool {
		leader = c.readyLeader()
		return leader >= 0
	}, "a ready leader")
	return leader
}

func (c *Cluster) readyLeader() int {
	for _, i := range c.running() {
		st := c.Server(i).Store()
		if st.IsLeader() && st.Ready() && st.HTTPAddr(st.ID()) != "" {
			return i
		}
	}
	return -1
}

// ReplaceActive deploys root as the active tree through the leader and
// returns the entry's raft index. When leadership moves while the entry
// is applied (a loaded machine can miss a heartbeat), it deploys again
// through the next leader: a whole-tree deploy applied twice leaves the
// state it leaves once.
func (c *Cluster) ReplaceActive(root *config.Node) uint64 {
	c.t.Helper()
	var idx uint64
	c.waitFor(Timeout, func() bool {
		var err error
		idx, err = c.Server(c.Leader()).Store().ReplaceActive(c.t.Context(), root)
		if err != nil && !errors.Is(err, store.ErrLeadershipLost) && !errors.Is(err, store.ErrNotLeader) {
			c.t.Fatalf("deploy the active tree: %v", err)
		}
		return err == nil
	}, "a deploy of the active tree")
	return idx
}

// Followers waits for a leader and returns the other running nodes.
func (c *Cluster) Followers() []int {
	c.t.Helper()
	l := c.Leader()
	var out []int
	for _, i := range c.running() {
		if i != l {
			out = append(out, i)
		}
	}
	return out
}

// WaitConverged waits until every running node that is not partitioned
// knows the same ready leader, has applied the leader's state and its
// raft configuration (the same members, addresses and suffrage, every
// running node a voter), and knows the HTTP address of every running
// node. A node behind on the configuration refuses the votes of members
// it does not know yet, so a test that kills the leader right then may
// see no new leader.
func (c *Cluster) WaitConverged() {
	c.t.Helper()
	c.waitFor(Timeout, func() bool {
		l := c.readyLeader()
		if l < 0 {
			return false
		}
		lst := c.Server(l).Store()
		want, ok := c.members(lst)
		if !ok {
			return false
		}
		for _, i := range c.running() {
			if !slices.Contains(want, c.Server(i).ID()+" "+c.Server(i).RaftAddr()+" voter") {
				return false
			}
		}
		for _, i := range c.running() {
			if c.partitioned(i) {
				continue
			}
			st := c.Server(i).Store()
			if id, _ := st.Leader(); id != lst.ID() || st.Index() != lst.Index() || !st.Ready() {
				return false
			}
			if got, ok := c.members(st); !ok || !slices.Equal(got, want) {
				return false
			}
			for _, j := range c.running() {
				if st.HTTPAddr(c.Server(j).ID()) != c.node(j).cfg.HTTPAddr {
					return false
				}
			}
		}
		return true
	}, "the cluster to converge")
}

// members returns st's raft configuration as sorted "id addr suffrage"
// strings, or false if st cannot tell now.
func (c *Cluster) members(st *store.Store) ([]string, bool) {
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Second)
	defer cancel()
	stats, err := st.Stats(ctx)
	if err != nil {
		return nil, false
	}
	out := make([]string, 0, len(stats.Members))
	for _, m := range stats.Members {
		suffrage := "voter"
		if !m.Voter {
			suffrage = "nonvoter"
		}
		out = append(out, m.ID+" "+m.Addr+" "+suffrage)
	}
	slices.Sort(out)
	return out, true
}

// Kill stops node i at once: in-flight requests are cut off and raft
// stops without handing over leadership, as when a process dies. Its
// data dir is kept for Restart.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.stop(i, 0)
}

// Stop shuts node i down gracefully.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.stop(i, 5*time.Second)
}

func (c *Cluster) stop(i int, grace time.Duration) {
	c.t.Helper()
	nd := c.node(i)
	c.mu.Lock()
	srv, running := nd.srv, nd.running
	nd.running = false
	c.mu.Unlock()
	if !running {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.t.Context()), grace)
	defer cancel()
	if grace == 0 {
		cancel()
	}
	if err := srv.Shutdown(ctx); err != nil {
		c.t.Errorf("mastertest: stop node %d: %v", i, err)
	}
	c.mu.Lock()
	nd.hold = holdPorts(nd.cfg.RaftAddr, nd.cfg.HTTPAddr)
	c.mu.Unlock()
}

// Restart starts node i again from its data dir, on the same ports.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	nd := c.node(i)
	c.mu.Lock()
	running := nd.running
	c.mu.Unlock()
	if running {
		c.t.Fatalf("mastertest: node %d is running", i)
	}
	c.start(nd)
}

// Partition cuts node i's raft traffic with the other nodes (its HTTP API
// stays reachable), as a network partition between masters would.
func (c *Cluster) Partition(i int) { c.setCut(i, true) }

// Heal reconnects node i's raft traffic.
func (c *Cluster) Heal(i int) { c.setCut(i, false) }

func (c *Cluster) setCut(i int, cut bool) {
	nd := c.node(i)
	c.mu.Lock()
	nd.cut = cut
	c.mu.Unlock()
	if cut {
		nd.sw.Cut()
	} else {
		nd.sw.Heal()
	}
}

func (c *Cluster) partitioned(i int) bool {
	nd := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.cut
}

// stopAll stops every running node; registered with t.Cleanup.
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, i := range c.running() {
		wg.Go(func() { c.stop(i, 5*time.Second) })
	}
	wg.Wait()
	// The end of the test frees every port.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		nd.hold.release()
		nd.hold = nil
	}
}

// Do sends a request with a bearer token (none if empty) to node i and
// returns the answer with its body read.
func (c *Cluster) Do(i int, method, path, token string, body []byte) (*http.Response, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.URL(i)+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := calltest.Client().Do(req)
	if err != nil {
		c.t.Fatalf("mastertest: %s %s on node %d: %v", method, path, i, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("mastertest: read %s %s on node %d: %v", method, path, i, err)
	}
	return resp, b
}

// Get is Do with GET and no body.
func (c *Cluster) Get(i int, path, token string) (*http.Response, []byte) {
	c.t.Helper()
	return c.Do(i, http.MethodGet, path, token, nil)
}

func (c *Cluster) waitFor(d time.Duration, cond func() bool, what string) {
	c.t.Helper()
	WaitFor(c.t, d, cond, what)
}

// WaitFor polls cond until it holds, or fails the test after d: for
// multi-node tests on real sockets, where no single signal says "done"
// (see [polltest.Wait]).
func WaitFor(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	polltest.Wait(t, what, d, cond)
}
