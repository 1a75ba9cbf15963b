package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/calltest"
)

// failoverCluster is three real `squall master` processes on fixed
// loopback ports (a restarted node keeps its addresses, which are its
// identity in the cluster).
type failoverCluster struct {
	t        *testing.T
	bin, dir string
	key      string // HS256 key file
	joinFile string
	token    string   // admin on root, tenant acme
	extra    []string // more flags of every node
	nodes    []*failoverNode
}

type failoverNode struct {
	id, http, raft string
	// bin is the binary the node runs, when not the cluster's.
	bin  string
	proc *proctest.Proc
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newFailoverCluster(t *testing.T, extra ...string) *failoverCluster {
	t.Helper()
	return newMixedCluster(t, [3]string{}, extra...)
}

// newMixedCluster is newFailoverCluster with node i running bins[i] (""
// for this package's binary); node 0 bootstraps the cluster.
func newMixedCluster(t *testing.T, bins [3]string, extra ...string) *failoverCluster {
	t.Helper()
	c := &failoverCluster{t: t, bin: squallBinary(t), dir: t.TempDir(), extra: extra}
	c.key = filepath.Join(c.dir, "hmac.key")
	c.joinFile = filepath.Join(c.dir, "join.token")
	if err := os.WriteFile(c.key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.joinFile, []byte("fedcba9876543210fedcba9876543210\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(mustRun(t, "token", "--user", "ops", "--auth", "all=root:admin", "--tenant", "acme", "--hmac-key-file", c.key))
	for i := range 3 {
		c.nodes = append(c.nodes, &failoverNode{id: fmt.Sprintf("m%d", i+1), http: freeAddr(t), raft: freeAddr(t), bin: bins[i]})
	}
	for i := range c.nodes {
		c.start(i)
	}
	c.waitHealthy()
	return c
}

// start starts node i from its data dir.
func (c *failoverCluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	args := []string{"master", "--node-id", n.id, "--data-dir", filepath.Join(c.dir, n.id),
		"--http", n.http, "--raft", n.raft, "--token-hmac-key-file", c.key, "--join-token-file", c.joinFile}
	if i == 0 {
		args = append(args, "--bootstrap")
	} else {
		args = append(args, "--join", "http://"+c.nodes[0].http)
	}
	args = append(args, c.extra...)
	bin := c.bin
	if n.bin != "" {
		bin = n.bin
	}
	n.proc = startRole(c.t, n.id, exec.Command(bin, args...))
}

// stop signals node i and waits for it to exit.
func (c *failoverCluster) stop(i int, sig os.Signal) {
	c.t.Helper()
	n := c.nodes[i]
	err := n.proc.End(c.t, sig)
	if sig == syscall.SIGTERM && err != nil {
		c.t.Fatalf("%s after SIGTERM: %v\n%s", n.id, err, n.proc.Logs.String())
	}
}

// clusterInfo is the part of GET /squall/v1/cluster the tests read.
type clusterInfo struct {
	State    string `json:"state"`
	LeaderID string `json:"leader_id"`
	Term     uint64 `json:"term"`
	Members  []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"members"`
}

// info reads node i's view of the cluster.
func (c *failoverCluster) info(i int) (clusterInfo, bool) {
	var info clusterInfo
	ctx, cancel := context.WithTimeout(c.t.Context(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.nodes[i].http+"/squall/v1/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := calltest.Client().Do(req)
	if err != nil {
		return info, false
	}
	defer resp.Body.Close()
	return info, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&info) == nil
}

// waitHealthy waits until every node is ready and sees the same leader
// and three voters.
func (c *failoverCluster) waitHealthy() {
	c.t.Helper()
	proctest.Wait(c.t, 60*time.Second, "a healthy cluster of three voters", nil, func() bool {
		leader := ""
		for i, n := range c.nodes {
			resp, err := calltest.Client().Get("http://" + n.http + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			info, ok := c.info(i)
			if resp.StatusCode != http.StatusOK || !ok || info.LeaderID == "" || len(info.Members) != 3 {
				return false
			}
			for _, m := range info.Members {
				if m.Suffrage != "voter" {
					return false
				}
			}
			if leader != "" && info.LeaderID != leader {
				return false
			}
			leader = info.LeaderID
		}
		return true
	})
}

// leader returns the index of the node every node names leader.
func (c *failoverCluster) leader() int {
	c.t.Helper()
	c.waitHealthy()
	info, _ := c.info(0)
	for i, n := range c.nodes {
		if n.id == info.LeaderID {
			return i
		}
	}
	c.t.Fatalf("unknown leader %q", info.LeaderID)
	return -1
}

// failoverLoad is clients sending findings inserts and patches, finding
// reads and config reads to random nodes, each request allowed 3 s in
// all (a client that cannot connect to a node tries another one within
// that time, as a client behind a load balancer would).
type failoverLoad struct {
	c        *failoverCluster
	cancel   context.CancelFunc
	stopping atomic.Bool
	wg       sync.WaitGroup
	// avoid is the index of a node the clients do not send to (a frozen
	// node accepts connections and answers nothing), or -1.
	avoid atomic.Int32
	// frozen is the index of a node that was frozen, or -1: a request
	// sent to it just before it froze waits for it, and when it is still
	// waiting at the end of its 3 s it is counted in stuck, not in errs
	// (no server can answer for a frozen process).
	frozen atomic.Int32
	stuck  int
	// uncertain holds the findings with a patch that got stuck so: it
	// may apply later, so their last ticket is not checked.
	uncertain map[string]bool

	mu      sync.Mutex
	ops     int
	writes  int
	errs    []string          // client-visible failures
	tickets map[string]string // acknowledged finding uid → last acknowledged ticket
	acks    []span            // acknowledged writes
}

// span is when a request was sent and when its answer came.
type span struct{ start, end time.Time }

const (
	loadClients   = 4
	loadBudget    = 3 * time.Second
	loadMaxPerCli = 20000
)

func (c *failoverCluster) startLoad() *failoverLoad {
	ctx, cancel := context.WithCancel(c.t.Context())
	l := &failoverLoad{c: c, cancel: cancel, tickets: map[string]string{}, uncertain: map[string]bool{}}
	l.avoid.Store(-1)
	l.frozen.Store(-1)
	for w := range loadClients {
		l.wg.Go(func() { l.client(ctx, w) })
	}
	return l
}

// newClusterUnderLoad starts a 3-node cluster and a load on it, and
// waits for the load's first 30 acknowledged writes. The load stops at
// the end of the test at the latest.
func newClusterUnderLoad(t *testing.T) (*failoverCluster, *failoverLoad) {
	t.Helper()
	c := newFailoverCluster(t)
	l := c.startLoad()
	t.Cleanup(l.stop)
	l.waitWrites(t, 30, "before any fault")
	return c, l
}

// restart starts node i of the cluster under load again, and waits until
// the cluster is healthy and 20 more writes are acknowledged.
func (l *failoverLoad) restart(t *testing.T, i int) {
	t.Helper()
	l.c.start(i)
	l.c.waitHealthy()
	l.waitWrites(t, 20, "after "+l.c.nodes[i].id+" restarted")
}

// stop stops the clients and returns once their last requests are
// answered (a write cut off by the client could still apply, unseen).
func (l *failoverLoad) stop() {
	l.stopping.Store(true)
	l.wg.Wait()
	l.cancel()
}

// counts returns the operations and writes acknowledged so far.
func (l *failoverLoad) counts() (ops, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops, l.writes
}

// waitOps waits for n more acknowledged writes.
func (l *failoverLoad) waitWrites(t *testing.T, n int, what string) {
	t.Helper()
	_, start := l.counts()
	proctest.Wait(t, 60*time.Second, fmt.Sprintf("%d acknowledged writes %s", n, what), nil, func() bool {
		_, w := l.counts()
		return w >= start+n
	})
}

// request sends one request within loadBudget, to random nodes until one
// answers. It returns the answer, or an error when none answered in time.
func (l *failoverLoad) request(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, loadBudget)
	defer cancel()
	// A write sent again after a broken connection (to a leader that
	// died) carries the same Idempotency-Key: it takes effect once.
	key := fmt.Sprintf("load-%016x%016x", rand.Uint64(), rand.Uint64())
	var lastErr error
	for ctx.Err() == nil {
		i := rand.IntN(len(l.c.nodes))
		if i == int(l.avoid.Load()) {
			continue
		}
		n := l.c.nodes[i]
		req, err := http.NewRequestWithContext(ctx, method, "http://"+n.http+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+l.c.token)
		req.Header.Set("Content-Type", "application/json")
		if method != http.MethodGet {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := calltest.Client().Do(req)
		if err != nil {
			if ctx.Err() != nil && i == int(l.frozen.Load()) {
				return 0, nil, &stuckError{node: n.id, err: err}
			}
			// Not connected, or the connection broke: try another node
			// (a node that is down refuses at once).
			lastErr = fmt.Errorf("%s: %w", n.id, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			lastErr = fmt.Errorf("%s: read: %w", n.id, err)
			continue
		}
		return resp.StatusCode, b, nil
	}
	return 0, nil, fmt.Errorf("no answer within %s: %w", loadBudget, lastErr)
}

// stuckError is a request that was still waiting for a frozen node when
// its time ran out.
type stuckError struct {
	node string
	err  error
}

func (e *stuckError) Error() string { return fmt.Sprintf("%s (frozen): %v", e.node, e.err) }

func (l *failoverLoad) fail(ctx context.Context, format string, args ...any) {
	if ctx.Err() != nil {
		return // the load was stopped mid-request
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range args {
		if e, ok := a.(error); ok {
			var stuck *stuckError
			if errors.As(e, &stuck) {
				l.stuck++
				return
			}
		}
	}
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *failoverLoad) client(ctx context.Context, w int) {
	var mine []string
	for k := 0; !l.stopping.Load() && ctx.Err() == nil && k < loadMaxPerCli; k++ {
		start := time.Now()
		switch {
		case k%4 == 0 || len(mine) == 0:
			body := fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "load", "resource_url": "https://example.com/login", "username": "c%d-%d", "password": "pw"}`, w, k)
			status, b, err := l.request(ctx, http.MethodPut, "/intel/api/sdk/v0/findings/credentials", []byte(body))
			var out struct{ UID string }
			if err != nil || (status != http.StatusCreated && status != http.StatusOK) || json.Unmarshal(b, &out) != nil {
				l.fail(ctx, "insert: %d %s %v", status, b, err)
				continue
			}
			mine = append(mine, out.UID)
			l.ack(out.UID, "", start)
		case k%4 == 1:
			uid, ticket := mine[rand.IntN(len(mine))], fmt.Sprintf("T-%d-%d", w, k)
			status, b, err := l.request(ctx, http.MethodPatch, "/intel/api/sdk/v0/finding/"+uid, []byte(`{"ticket": "`+ticket+`"}`))
			if err != nil || status != http.StatusOK {
				var stuck *stuckError
				if errors.As(err, &stuck) {
					l.mu.Lock()
					l.uncertain[uid] = true
					l.mu.Unlock()
				}
				l.fail(ctx, "patch: %d %s %v", status, b, err)
				continue
			}
			l.ack(uid, ticket, start)
		case k%4 == 2:
			status, b, err := l.request(ctx, http.MethodGet, "/api/v2_beta/config/active/tree/children/all", nil)
			if err != nil || status != http.StatusOK {
				l.fail(ctx, "config read: %d %s %v", status, b, err)
				continue
			}
			l.ack("", "", time.Time{})
		default:
			uid := mine[rand.IntN(len(mine))]
			status, b, err := l.request(ctx, http.MethodGet, "/intel/api/sdk/v0/finding/"+uid, nil)
			if err != nil || status != http.StatusOK {
				l.fail(ctx, "finding read: %d %s %v", status, b, err)
				continue
			}
			l.ack("", "", time.Time{})
		}
	}
}

// ack counts an acknowledged request; a write has its uid, the ticket
// it set if any, and the time it was sent.
func (l *failoverLoad) ack(uid, ticket string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops++
	if uid == "" {
		return
	}
	l.writes++
	if ticket != "" || l.tickets[uid] == "" {
		l.tickets[uid] = ticket
	}
	l.acks = append(l.acks, span{sent, time.Now()})
}

// resumed returns how long after t0 the first write sent after t0 was
// acknowledged.
func (l *failoverLoad) resumed(t0 time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := time.Duration(-1)
	for _, a := range l.acks {
		if d := a.end.Sub(t0); !a.start.Before(t0) && (first < 0 || d < first) {
			first = d
		}
	}
	return first
}

// check asserts no client-visible failure and no lost acknowledged write:
// every acknowledged finding is read back from every node, with its last
// acknowledged ticket.
func (l *failoverLoad) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Errorf("%d of %d requests failed, e.g.:\n%s", len(l.errs), l.ops+len(l.errs), strings.Join(l.errs[:min(len(l.errs), 10)], "\n"))
	}
	lost := 0
	for uid, ticket := range l.tickets {
		for _, n := range l.c.nodes {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+n.http+"/intel/api/sdk/v0/finding/"+uid, nil)
			req.Header.Set("Authorization", "Bearer "+l.c.token)
			resp, err := calltest.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				Findings []struct {
					Ticket *string `json:"ticket"`
				} `json:"findings"`
			}
			err = json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil || len(env.Findings) != 1 {
				lost++
				t.Errorf("finding %s via %s: %d %v", uid, n.id, resp.StatusCode, err)
				continue
			}
			if ticket != "" && !l.uncertain[uid] && (env.Findings[0].Ticket == nil || *env.Findings[0].Ticket != ticket) {
				lost++
				got := "null"
				if env.Findings[0].Ticket != nil {
					got = *env.Findings[0].Ticket
				}
				t.Errorf("finding %s via %s: ticket %q, want the last acknowledged %q", uid, n.id, got, ticket)
			}
		}
	}
	t.Logf("%d requests acknowledged (%d writes), %d failed, %d sent to a node just before it froze and unanswered in time; %d findings read back from every node, %d lost",
		l.ops, l.writes, len(l.errs), l.stuck, len(l.tickets), lost)
}

// TestMasterBinary_RollingRestart restarts every node of a 3-node cluster
// of real processes, one at a time (SIGTERM, then start again), the
// leader first, while clients send a steady load: no request is answered
// with an error, none goes unanswered within 3 s, and no acknowledged
// write is lost.
func TestMasterBinary_RollingRestart(t *testing.T) {
	t.Parallel()
	c, l := newClusterUnderLoad(t)
	order := []int{c.leader()}
	for i := range c.nodes {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	for _, i := range order {
		c.stop(i, syscall.SIGTERM)
		if !strings.Contains(c.nodes[i].proc.Logs.String(), "leadership handed over") && i == order[0] {
			t.Errorf("the leader %s did not hand its leadership over:\n%s", c.nodes[i].id, c.nodes[i].proc.Logs.String())
		}
		l.waitWrites(t, 20, "while "+c.nodes[i].id+" is down")
		l.restart(t, i)
	}
	l.stop()
	l.check(t)
}

// TestMasterBinary_LeaderKilled SIGKILLs the leader of a 3-node cluster
// of real processes twice (restarting it in between) while clients send
// a steady load: no request is answered with an error, none goes
// unanswered within 3 s, and no acknowledged write is lost. It logs how
// long writes stopped after each kill.
func TestMasterBinary_LeaderKilled(t *testing.T) {
	t.Parallel()
	c, l := newClusterUnderLoad(t)
	for range 2 {
		i := c.leader()
		killed := time.Now()
		c.stop(i, syscall.SIGKILL)
		l.waitWrites(t, 20, "after "+c.nodes[i].id+" was killed")
		info := "unknown"
		for j := range c.nodes {
			if j == i {
				continue
			}
			if ci, ok := c.info(j); ok {
				info = ci.LeaderID
				break
			}
		}
		t.Logf("killed leader %s; new leader %s; first write sent after the kill acknowledged after %s", c.nodes[i].id, info, l.resumed(killed).Round(time.Millisecond))
		l.restart(t, i)
	}
	l.stop()
	l.check(t)
}

// TestMasterBinary_LeaderFrozen SIGSTOPs the leader of a 3-node cluster
// of real processes while clients send a steady load to the two other
// nodes: requests that the frozen leader had are sent again to the new
// leader (inserts, patches, reads: all retry-safe), none is answered with
// an error or goes unanswered within 3 s, and no acknowledged write is
// lost. The old leader, resumed, follows the new one.
func TestMasterBinary_LeaderFrozen(t *testing.T) {
	t.Parallel()
	c, l := newClusterUnderLoad(t)
	i := c.leader()
	l.avoid.Store(int32(i))
	l.frozen.Store(int32(i))
	frozen := time.Now()
	c.nodes[i].proc.Signal(t, syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			_ = c.nodes[i].proc.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	l.waitWrites(t, 20, "after "+c.nodes[i].id+" froze")
	t.Logf("froze leader %s; first write sent after the freeze acknowledged after %s", c.nodes[i].id, l.resumed(frozen).Round(time.Millisecond))
	c.nodes[i].proc.Signal(t, syscall.SIGCONT)
	resumed = true
	c.waitHealthy()
	l.avoid.Store(-1)
	l.waitWrites(t, 20, "after "+c.nodes[i].id+" resumed")
	l.stop()
	l.check(t)
	if t.Failed() {
		for _, n := range c.nodes {
			for _, line := range strings.Split(n.proc.Logs.String(), "\n") {
				if strings.Contains(line, "leader") || strings.Contains(line, "election") || strings.Contains(line, "NO_LEADER") {
					t.Logf("%s: %s", n.id, line)
				}
			}
		}
	}
}

// Measurements, not run by default (timed figures do not belong in
// assertions): docs/operations.md ("Failover") records their results.
var (
	failoverRounds = flag.Int("failover.rounds", 0, "TestMasterBinary_FailoverTimes: leader kills per configuration")
	failoverQuiet  = flag.Duration("failover.quiet", 0, "TestMasterBinary_FailoverTimes: also count leader changes over this long without kills, idle and then under load")
)

// failoverConfigs are the raft timeouts compared: the defaults, and the
// defaults before they were flags (raft's own).
var failoverConfigs = []struct {
	name string
	args []string
}{
	{"default", nil},
	{"heartbeat-1s", []string{"--raft-heartbeat-timeout", "1s", "--raft-election-timeout", "1s", "--raft-leader-lease-timeout", "500ms"}},
}

// TestMasterBinary_FailoverTimes measures, side by side, how long writes
// stop after the leader is SIGKILLed (from the kill to the first
// acknowledged write sent after it, through any node) with each of
// failoverConfigs, alternating kills between one cluster of each, and
// counts the leader changes (term increments) of those clusters while
// nothing is killed. Run with -failover.rounds N (and -failover.quiet D).
func TestMasterBinary_FailoverTimes(t *testing.T) {
	if *failoverRounds == 0 && *failoverQuiet == 0 {
		t.Skip("a measurement: run with -failover.rounds N and/or -failover.quiet D")
	}
	clusters := make([]*failoverCluster, len(failoverConfigs))
	for i, fc := range failoverConfigs {
		clusters[i] = newFailoverCluster(t, fc.args...)
	}
	terms := func() []uint64 {
		var out []uint64
		for _, c := range clusters {
			c.waitHealthy()
			info, _ := c.info(0)
			out = append(out, info.Term)
		}
		return out
	}
	quiet := func(what string) {
		if *failoverQuiet == 0 {
			return
		}
		before := terms()
		timer := time.NewTimer(*failoverQuiet)
		select {
		case <-timer.C:
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
		after := terms()
		for i, fc := range failoverConfigs {
			t.Logf("%s, %s, %s: %d leader changes", fc.name, what, *failoverQuiet, after[i]-before[i])
		}
	}
	quiet("idle")
	loads := make([]*failoverLoad, len(clusters))
	for i, c := range clusters {
		loads[i] = c.startLoad()
	}
	defer func() {
		for _, l := range loads {
			l.stop()
		}
	}()
	quiet("under load")
	times := make([][]time.Duration, len(clusters))
	for range *failoverRounds {
		for i, c := range clusters {
			l := loads[i]
			l.waitWrites(t, 20, "before a kill")
			leader := c.leader()
			killed := time.Now()
			c.stop(leader, syscall.SIGKILL)
			l.waitWrites(t, 5, "after a kill")
			times[i] = append(times[i], l.resumed(killed))
			c.start(leader)
			c.waitHealthy()
		}
	}
	for i, fc := range failoverConfigs {
		if len(times[i]) == 0 {
			continue
		}
		sorted := slices.Clone(times[i])
		slices.Sort(sorted)
		t.Logf("%s: %d kills: median %s, min %s, max %s: %v", fc.name, len(sorted),
			sorted[len(sorted)/2].Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), times[i])
	}
}

// TestMasterRaftTimeoutFlags: raft timeouts that make no sense stop the
// master before it touches anything, with an error naming them.
func TestMasterRaftTimeoutFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--raft-leader-lease-timeout", "2s"}, "leader lease timeout 2s is longer than the heartbeat timeout 600ms"},
		{[]string{"--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "1s"}, "election timeout 1s is shorter than the heartbeat timeout 2s"},
		{[]string{"--raft-heartbeat-timeout", "1ms"}, "heartbeat timeout 1ms is shorter than 50ms"},
		{[]string{"--raft-commit-timeout", "-1s"}, "raft commit timeout is negative"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		args := append([]string{"master", "--node-id", "m1", "--data-dir", dir, "--allow-unsigned-tokens",
			"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap"}, tc.args...)
		code, _, stderr := runSquall(t, "", args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %s; want %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: the data dir was created", tc.args)
		}
	}
}
