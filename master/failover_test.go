package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// refusingDialer dials addresses for real, except that while refuse is
// positive each dial goes to a port that refuses connections instead: a
// real "connection refused", as from a leader that just died.
type refusingDialer struct {
	refuse  atomic.Int32
	refused atomic.Int32
	closed  string // a port whose connections are refused
}

// newRefusingDialer's refused port stays bound (see
// mastertest.RefusedAddr): a port freed by closing a listener was taken
// by a node of a test running alongside, which answered 200 to the
// "refused" request.
func newRefusingDialer(t *testing.T) *refusingDialer {
	t.Helper()
	return &refusingDialer{closed: mastertest.RefusedAddr(t)}
}

func (d *refusingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.refuse.Add(-1) >= 0 {
		d.refused.Add(1)
		addr = d.closed
	}
	return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
}

// TestForward_DialRefused: a follower that cannot connect to the leader
// (the connection is refused) looks for the leader again and sends the
// request again, whatever its method: it never reached the leader.
func TestForward_DialRefused(t *testing.T) {
	t.Parallel()
	dialers := make([]*refusingDialer, 3)
	for i := range dialers {
		dialers[i] = newRefusingDialer(t)
	}
	c := mastertest.TestCluster(t, 3, mountTestAPI(), mastertest.WithConfig(func(i int, cfg *master.Config) {
		cfg.ForwardDial = dialers[i].dial
	}))
	// Hand the leadership over: the remaining follower has no connection
	// to the new leader in its pool (it joined through the old one), so
	// its next forward dials.
	c.Stop(c.Leader())
	leader := c.Leader()
	f := c.Followers()[0]
	dialers[f].refuse.Store(2)
	resp, body := c.Do(f, http.MethodPost, "/api/v2_beta/test/append/refused", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST through follower %d: %d %s", f, resp.StatusCode, body)
	}
	if n := dialers[f].refused.Load(); n != 2 {
		t.Fatalf("%d dials refused, want 2", n)
	}
	if n := metrictest.Sum(t, c.Registry(f), "squall_master_forwarded_requests_total", map[string]string{"result": "retry"}); n != 2 {
		t.Errorf("retries counted: %v, want 2", n)
	}
	if got := childNames(c, leader); strings.Count(strings.Join(got, ","), "refused") != 1 {
		t.Errorf("the write was applied %d times: %v", strings.Count(strings.Join(got, ","), "refused"), got)
	}
}

// gatedAPI is a route mounted on every node that blocks, on the node
// named by block, until gate is closed: a leader that stops answering.
// A PATCH is declared idempotent; a POST is not.
type gatedAPI struct {
	block   atomic.Pointer[string]
	gate    chan struct{}
	entered chan string // "<node> <method>" for each request that blocked
	served  sync.Map    // "<node> <method>" → *atomic.Int32
}

const gatedPrefix = "/api/v2_beta/gated/"

func (g *gatedAPI) option() mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := s.ID() + " " + r.Method
			n, _ := g.served.LoadOrStore(key, &atomic.Int32{})
			n.(*atomic.Int32).Add(1)
			if b := g.block.Load(); b != nil && *b == s.ID() {
				g.entered <- key
				if strings.HasSuffix(r.URL.Path, "/cut") {
					// The connection breaks with the request applied
					// or not: the forwarding node cannot know.
					panic(http.ErrAbortHandler)
				}
				select {
				case <-g.gate:
				case <-r.Context().Done():
				}
				if !s.Store().IsLeader() {
					// As the real handlers do when their write cannot
					// commit any more.
					w.Header().Set("Retry-After", "1")
					http.Error(w, "not the leader any more", http.StatusServiceUnavailable)
					return
				}
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"node":%q}`, s.ID())
		})
		if err := s.Mount(gatedPrefix, h, master.OnLeader, master.IdempotentMethods(http.MethodPatch)); err != nil {
			panic(err)
		}
	})
}

// awaitBlocked waits until n requests block on the node named by block.
func (g *gatedAPI) awaitBlocked(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case k := <-g.entered:
			t.Logf("blocked on the leader: %s", k)
		case <-time.After(mastertest.Timeout):
			t.Fatal("the requests did not reach the leader")
		}
	}
}

func (g *gatedAPI) count(node, method string) int32 {
	n, ok := g.served.Load(node + " " + method)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// TestForward_LeaderFrozen: a leader stops answering while it has
// forwarded requests, and its raft goes silent. The follower that
// forwarded them notices when raft's heartbeat timeout passes, and sends
// the requests that cannot apply twice (GET, a PATCH declared
// idempotent) to the new leader; a POST, which the frozen leader may have
// applied, is answered 503 LEADER_LOST.
func TestForward_LeaderFrozen(t *testing.T) {
	t.Parallel()
	g := &gatedAPI{gate: make(chan struct{}), entered: make(chan string, 8)}
	c := mastertest.TestCluster(t, 3, g.option())
	t.Cleanup(func() { close(g.gate) }) // before the cluster stops
	old := c.Leader()
	oldID := c.Server(old).ID()
	g.block.Store(&oldID)
	f := c.Followers()[0]

	send := func(method string) <-chan asyncAnswer {
		req, _ := http.NewRequestWithContext(t.Context(), method, c.URL(f)+gatedPrefix+"x", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		return sendAsync(req)
	}
	answers := map[string]<-chan asyncAnswer{}
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodPost} {
		answers[m] = send(m)
	}
	g.awaitBlocked(t, len(answers))
	// The leader goes silent: the followers elect another one.
	c.Partition(old)
	t.Cleanup(func() { c.Heal(old) })
	for _, m := range []string{http.MethodGet, http.MethodPatch} {
		a := <-answers[m]
		if a.err != nil || a.status != http.StatusOK || strings.Contains(a.body, oldID) {
			t.Fatalf("%s: %d %s %v, want 200 from the new leader", m, a.status, a.body, a.err)
		}
		if resent := a.header.Get(master.HeaderResent); resent != "true" {
			t.Errorf("%s sent again without %s: true (got %q)", m, master.HeaderResent, resent)
		}
	}
	a := <-answers[http.MethodPost]
	if a.err != nil || a.status != http.StatusServiceUnavailable {
		t.Fatalf("POST: %d %s %v, want 503 LEADER_LOST", a.status, a.body, a.err)
	}
	if notApplied := a.header.Get(master.HeaderNotApplied); notApplied != "" {
		t.Errorf("LEADER_LOST with %s: %s", master.HeaderNotApplied, notApplied)
	}
	if resent := a.header.Get(master.HeaderResent); resent != "" {
		t.Errorf("LEADER_LOST, not sent again, with %s: %s", master.HeaderResent, resent)
	}
	var e apiErr
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Code != "LEADER_LOST" || !strings.Contains(e.Message, "may or may not have been applied") {
		t.Fatalf("POST answer %s (%v), want code LEADER_LOST", a.body, err)
	}
	for _, i := range c.Running() {
		if id := c.Server(i).ID(); id != oldID && g.count(id, http.MethodPost) != 0 {
			t.Errorf("the POST was sent again, to %s", id)
		}
	}
}

// TestForward_ConnectionCut: the leader's connection breaks while it has
// a POST: the follower cannot know whether it was applied and answers
// 503 LEADER_LOST without sending it again; a PATCH declared idempotent
// is sent again (the leader keeps cutting it, so until the attempts run
// out, and then answered LEADER_LOST too).
func TestForward_ConnectionCut(t *testing.T) {
	t.Parallel()
	g := &gatedAPI{gate: make(chan struct{}), entered: make(chan string, 64)}
	c := mastertest.TestCluster(t, 3, g.option())
	t.Cleanup(func() { close(g.gate) })
	leader := c.Leader()
	id := c.Server(leader).ID()
	g.block.Store(&id)
	f := c.Followers()[0]

	resp, body := c.Do(f, http.MethodPost, gatedPrefix+"cut", c.AdminToken, []byte(`{}`))
	wantError(t, resp, body, http.StatusServiceUnavailable, "LEADER_LOST")
	if n := g.count(id, http.MethodPost); n != 1 {
		t.Fatalf("the leader had the POST %d times, want 1", n)
	}
	resp, body = c.Do(f, http.MethodPatch, gatedPrefix+"cut", c.AdminToken, []byte(`{}`))
	wantError(t, resp, body, http.StatusServiceUnavailable, "LEADER_LOST")
	if n := g.count(id, http.MethodPatch); n < 2 {
		t.Fatalf("the leader had the PATCH %d times, want it sent again", n)
	}
}

// TestShutdown_HandsOverLeadership stops the leader gracefully while
// writers append through every node: the leadership moves to another
// node and no request gets an error answer (a request sent to the
// stopping node after it closed its listener fails to connect, which a
// client retries elsewhere; it is not counted).
func TestShutdown_HandsOverLeadership(t *testing.T) {
	t.Parallel()
	// Long raft timeouts: the only leader change here is the handover. A
	// busy 2-core machine running the race detector stalls the three
	// in-process nodes at times, and a leader that steps down on its own
	// meanwhile answers a write 503, which is not what this test is about.
	slow := mastertest.WithStore(func(sc *store.Config) {
		sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 3*time.Second
	})
	c := mastertest.TestCluster(t, 3, mountTestAPI(), slow)
	old := c.Leader()
	oldID := c.Server(old).ID()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var (
		mu      sync.Mutex
		acked   []string
		errs    []string
		seq     atomic.Int64
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for w := range 4 {
		wg.Go(func() {
			for k := 0; ctx.Err() == nil && k < 5000; k++ {
				i := (w + k) % 3
				if i == old && stopped.Load() {
					continue
				}
				name := fmt.Sprintf("w%d", seq.Add(1))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(i)+"/api/v2_beta/test/append/"+name, nil)
				resp, err := calltest.Client().Do(req)
				if err != nil {
					if ctx.Err() == nil && i != old {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("node %d: %v", i, err))
						mu.Unlock()
					}
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == http.StatusOK {
					acked = append(acked, name)
				} else {
					errs = append(errs, fmt.Sprintf("node %d: %d %s", i, resp.StatusCode, b))
				}
				mu.Unlock()
			}
		})
	}
	mastertest.WaitFor(t, 10*time.Second, func() bool { return ackCount() >= 20 }, "20 writes before the stop")
	stopped.Store(true)
	c.Stop(old)
	before := ackCount()
	mastertest.WaitFor(t, 10*time.Second, func() bool { return ackCount() >= before+20 }, "20 writes after the stop")
	cancel()
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d requests failed, e.g. %s", len(errs), errs[0])
	}
	if !strings.Contains(c.Log(old), "leadership handed over") {
		t.Errorf("no handover in the old leader's log:\n%s", c.Log(old))
	}
	leader := c.Leader()
	if c.Server(leader).ID() == oldID {
		t.Fatal("the stopped node still leads")
	}
	if got := childNames(c, leader); !hasAll(got, acked) {
		t.Fatalf("acknowledged writes lost: %d names, %d acknowledged", len(got), len(acked))
	}
	t.Logf("%d writes acknowledged, none failed", len(acked))
}

// TestForward_LeadershipLostWhileServing: a leader loses its leadership
// while it serves requests sent to it directly, whose handler then
// answers 503. A GET (retry-safe) is routed again, to the new leader,
// and succeeds; a POST gets the 503.
func TestForward_LeadershipLostWhileServing(t *testing.T) {
	t.Parallel()
	g := &gatedAPI{gate: make(chan struct{}), entered: make(chan string, 8)}
	c := mastertest.TestCluster(t, 3, g.option(), mountTestAPI())
	gateOpen := false
	t.Cleanup(func() {
		if !gateOpen {
			close(g.gate)
		}
	})
	old := c.Leader()
	oldID := c.Server(old).ID()
	g.block.Store(&oldID)

	send := func(method string) <-chan asyncAnswer {
		req, _ := http.NewRequestWithContext(t.Context(), method, c.URL(old)+gatedPrefix+"x", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		return sendAsync(req)
	}
	get, post := send(http.MethodGet), send(http.MethodPost)
	g.awaitBlocked(t, 2)
	// The leader is cut off and steps down; the others elect a new one;
	// healed, the old leader follows it.
	c.Partition(old)
	mastertest.WaitFor(t, mastertest.Timeout, func() bool { return !c.Server(old).Store().IsLeader() }, "the old leader to step down")
	var other int
	for _, i := range c.Running() {
		if i != old {
			other = i
		}
	}
	// A write through the majority: raft's replication to the cut-off
	// node resumes with it after healing.
	appendEventually(t, c, other, "meanwhile")
	c.Heal(old)
	c.WaitConverged()
	if id, _ := c.Server(old).Store().Leader(); id == oldID {
		t.Fatal("the old leader leads again")
	}
	close(g.gate)
	gateOpen = true
	if a := <-get; a.status != http.StatusOK || strings.Contains(a.body, oldID) {
		t.Fatalf("GET: %d %s %v, want 200 from the new leader", a.status, a.body, a.err)
	}
	if a := <-post; a.status != http.StatusServiceUnavailable {
		t.Fatalf("POST: %d %s %v, want the handler's 503", a.status, a.body, a.err)
	}
}

// TestForward_ReelectedServesTheBodyAgain: a leader serves a retry-safe
// request, loses its leadership while its handler runs (the handler
// answers 503), and is elected again before the request is routed
// elsewhere: it serves the request again, with the body the first turn
// read — not the server request's, which that turn consumed.
func TestForward_ReelectedServesTheBodyAgain(t *testing.T) {
	t.Parallel()
	const prefix = "/api/v2_beta/echo/"
	var (
		calls   atomic.Int32
		entered = make(chan struct{})
		answer  = make(chan struct{}) // the first call may answer
		resume  = make(chan struct{}) // the first call may return
	)
	setup := mastertest.WithSetup(func(_ int, s *master.Server) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if calls.Add(1) == 1 {
				close(entered)
				<-answer
				// As the real handlers do when their write cannot commit
				// any more; then this turn stays until the node leads
				// again.
				w.Header().Set("Retry-After", "1")
				http.Error(w, "not the leader any more", http.StatusServiceUnavailable)
				<-resume
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "%s got %s", s.ID(), body)
		})
		if err := s.Mount(prefix, h, master.OnLeader, master.IdempotentMethods(http.MethodPatch)); err != nil {
			panic(err)
		}
	})
	c := mastertest.TestCluster(t, 3, setup)
	old := c.Leader()
	oldID := c.Server(old).ID()

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, c.URL(old)+prefix+"x", strings.NewReader("payload-42"))
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	res := sendAsync(req)
	select {
	case <-entered:
	case <-time.After(mastertest.Timeout):
		t.Fatal("the request did not reach the leader's handler")
	}
	// The leader is cut off and steps down; its handler answers 503.
	c.Partition(old)
	mastertest.WaitFor(t, mastertest.Timeout, func() bool { return !c.Server(old).Store().IsLeader() }, "the old leader to step down")
	close(answer)
	// Healed, it is made leader again while the first turn still runs.
	c.Heal(old)
	c.WaitConverged()
	deadline := time.Now().Add(mastertest.Timeout)
	for !c.Server(old).Store().IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the old leader was not elected again")
		}
		l := c.Leader()
		if l == old {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := c.Server(l).Store().TransferLeadership(ctx)
		cancel()
		if err != nil {
			t.Logf("transfer from %s: %v", c.Server(l).ID(), err)
		}
		c.WaitConverged()
	}
	close(resume)
	r := <-res
	if want := oldID + " got payload-42"; r.status != http.StatusOK || r.body != want {
		t.Fatalf("answer %d %q %v, want 200 %q", r.status, r.body, r.err, want)
	}
	if r.header.Get(master.HeaderResent) != "true" {
		t.Errorf("answer without %s: true", master.HeaderResent)
	}
}
