package robustness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
)

// Cluster is a cluster of real `squall master` processes on loopback,
// their raft traffic through a [Network]. Build it with [StartCluster];
// the test's end kills the processes.
type Cluster struct {
	// Net is the raft network between the nodes: partitions.
	Net *Network
	// Nodes are the masters, in the order they were started; Nodes[0]
	// bootstrapped the cluster.
	Nodes []*Node
	// Token is an admin token on the root, of tenant "robust" for the
	// findings API, accepted by every node.
	Token string
	// control is the client of the suite's own requests (readiness,
	// leader lookups, final read-back), not counted in the history.
	control *http.Client
}

// NodeState is what the nemesis did to a node's process.
type NodeState int

// The states of a node's process.
const (
	NodeUp      NodeState = iota // running
	NodeKilled                   // SIGKILLed, not restarted yet
	NodeStopped                  // SIGSTOPped
)

// Node is one master process of a Cluster. Its addresses stay the same
// across restarts.
type Node struct {
	// Index is the node's place in Cluster.Nodes (and its Network
	// index); ID its --node-id, m1, m2, ….
	Index int
	ID    string
	// IP is the node's own loopback IP: it listens and dials from it.
	IP string
	// HTTPAddr is its HTTP address; RaftAddr its raft listen address;
	// RaftAdvertise the address of its raft proxy, which peers dial.
	HTTPAddr, RaftAddr, RaftAdvertise string
	// LogPath is the file its standard error (JSON logs) goes to, over
	// every restart.
	LogPath string

	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	st   NodeState
}

// URL returns the node's HTTP base URL.
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// State returns what the nemesis did to the node's process.
func (n *Node) State() NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}

// StartCluster starts size masters, each on its own IP 127.X.Y.N (X, Y
// random for this cluster, so concurrent runs do not meet), the first
// bootstrapping and the others joining through it, and waits until all
// are voters. extra args go to every node. Artifacts (node logs, key
// files) go to dir.
func StartCluster(t *testing.T, dir string, size int, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{Net: NewNetwork(t), control: calltest.Client()}
	c.control.Timeout = 5 * time.Second
	keyFile := filepath.Join(dir, "token.key")
	joinFile := filepath.Join(dir, "join.token")
	for _, f := range []string{keyFile, joinFile} {
		if err := os.WriteFile(f, []byte(randomHex(32)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := exec.Command(squallBin, "token", "--user", "robust", "--tenant", "robust",
		"--auth", "all=root:admin", "--hmac-key-file", keyFile, "--ttl", "48h").Output()
	if err != nil {
		t.Fatalf("mint token: %v", err)
	}
	c.Token = strings.TrimSpace(string(tok))
	base := fmt.Sprintf("127.%d.%d.", 100+mrand.IntN(150), mrand.IntN(256))
	for i := range size {
		ip := base + strconv.Itoa(i+1)
		n := &Node{Index: i, ID: fmt.Sprintf("m%d", i+1), IP: ip, LogPath: filepath.Join(dir, fmt.Sprintf("m%d.log", i+1))}
		n.HTTPAddr, n.RaftAddr = freeAddr(t, ip), freeAddr(t, ip)
		if n.RaftAdvertise, err = c.Net.AddNode(i, ip, n.RaftAddr); err != nil {
			t.Fatal(err)
		}
		n.args = append([]string{"master", "--node-id", n.ID, "--data-dir", filepath.Join(dir, n.ID),
			"--http", n.HTTPAddr, "--raft", n.RaftAddr, "--raft-advertise", n.RaftAdvertise,
			"--raft-source-ip", ip, "--token-hmac-key-file", keyFile, "--join-token-file", joinFile,
			"--shutdown-timeout", "2s"}, extra...)
		if i == 0 {
			n.args = append(n.args, "--bootstrap")
		} else {
			n.args = append(n.args, "--join", c.Nodes[0].URL())
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(c.stopAll)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, n); err != nil {
			t.Fatalf("%s: %v\n%s", n.ID, err, tail(n.LogPath))
		}
	}
	if err := c.WaitVoters(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// freeAddr returns ip:port with a port free on ip now. The IPs of a
// cluster are its own, so the port stays free for its node.
func freeAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail returns the end of a log file, for failure messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Start starts (or restarts) n's process, appending to its log.
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is running", n.ID)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(squallBin, n.args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.cmd, n.done, n.st = cmd, done, NodeUp
	return nil
}

// Kill SIGKILLs n and waits for the process to end.
func (c *Cluster) Kill(n *Node) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.st = nil, NodeKilled
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop SIGSTOPs n: it holds its connections but does nothing.
func (c *Cluster) Stop(n *Node) { c.signal(n, syscall.SIGSTOP, NodeStopped) }

// Cont SIGCONTs a stopped n.
func (c *Cluster) Cont(n *Node) { c.signal(n, syscall.SIGCONT, NodeUp) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, st NodeState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	n.st = st
}

// stopAll kills every process (stopped ones too) at the test's end.
func (c *Cluster) stopAll() {
	for _, n := range c.Nodes {
		c.Kill(n)
	}
}

// Up returns the nodes whose process runs (not killed; stopped ones
// included: a client cannot tell them from slow ones).
func (c *Cluster) Up() []*Node {
	var up []*Node
	for _, n := range c.Nodes {
		if n.State() != NodeKilled {
			up = append(up, n)
		}
	}
	return up
}

// get does a control GET of path on n with the cluster's token and
// decodes a 200 JSON answer into v.
func (c *Cluster) get(ctx context.Context, n *Node, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.control.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: status %d", path, n.ID, resp.StatusCode)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// poll calls f every 50 ms until it returns nil or ctx ends; separate
// processes give no event to wait on.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitReady waits until n answers /readyz with 200.
func (c *Cluster) WaitReady(ctx context.Context, n *Node) error {
	return poll(ctx, func() error { return c.get(ctx, n, "/readyz", nil) })
}

// ClusterView is the part of GET /squall/v1/cluster the suite reads.
type ClusterView struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	Members      []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"members"`
}

// View returns n's view of the cluster.
func (c *Cluster) View(ctx context.Context, n *Node) (ClusterView, error) {
	var v ClusterView
	err := c.get(ctx, n, "/squall/v1/cluster", &v)
	return v, err
}

// WaitVoters waits until a leader reports every node as a voter.
func (c *Cluster) WaitVoters(ctx context.Context) error {
	return poll(ctx, func() error {
		l, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		v, err := c.View(ctx, l)
		if err != nil {
			return err
		}
		voters := 0
		for _, m := range v.Members {
			if m.Suffrage == "voter" {
				voters++
			}
		}
		if voters != len(c.Nodes) {
			return fmt.Errorf("%d voters of %d", voters, len(c.Nodes))
		}
		return nil
	})
}

// Leader returns the running node that reports itself leader with the
// highest term (a partitioned old leader may still believe it leads, in
// an older term).
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	var (
		best *Node
		term uint64
	)
	for _, n := range c.Nodes {
		if n.State() != NodeUp {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		v, err := c.View(ctx, n)
		cancel()
		if err == nil && v.State == "Leader" && v.Term >= term {
			best, term = n, v.Term
		}
	}
	if best == nil {
		return nil, errors.New("no leader")
	}
	return best, nil
}

// Heal undoes every fault: partitions healed, stopped nodes continued,
// killed ones restarted; then it waits until every node is ready.
func (c *Cluster) Heal(ctx context.Context) error {
	c.Net.Heal()
	for _, n := range c.Nodes {
		switch n.State() {
		case NodeStopped:
			c.Cont(n)
		case NodeKilled:
			if err := c.Start(n); err != nil {
				return err
			}
		}
	}
	for _, n := range c.Nodes {
		if err := c.WaitReady(ctx, n); err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
	}
	return nil
}
