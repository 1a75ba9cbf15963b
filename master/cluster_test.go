package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestCluster_WritesThroughAnyNode writes through every node; each write
// is visible on every node.
func TestCluster_WritesThroughAnyNode(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	var want []string
	var last uint64
	for i := range 3 {
		name := fmt.Sprintf("via%d", i)
		last = appendVia(t, c, i, name)
		want = append(want, name)
	}
	mastertest.WaitFor(t, 5*time.Second, func() bool {
		for i := range 3 {
			if _, idx := c.Server(i).Store().Active(); idx != last {
				return false
			}
		}
		return true
	}, "every node to apply the writes")
	for i := range 3 {
		if got := childNames(c, i); !slices.Equal(got, want) {
			t.Fatalf("node %d has %v, want %v", i, got, want)
		}
	}
}

// TestCluster_ForwardedLikeOnLeader sends the same request to the leader
// and to a follower: the follower relays the leader's answer unchanged,
// and the leader sees the method, path, query, headers and body.
func TestCluster_ForwardedLikeOnLeader(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	leader := c.Leader()
	follower := c.Followers()[0]
	send := func(i int) (*http.Response, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut,
			c.URL(i)+"/api/v2_beta/test/echo/a%2Fb/c?x=1&y=two%20words", strings.NewReader(`{"payload":[1,2,3]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		req.Header.Set("X-Custom", "custom value")
		req.Header.Set("Content-Type", "application/json")
		return calltest.Do(t, calltest.Client().Do, req)
	}
	lr, lb := send(leader)
	fr, fb := send(follower)
	if lr.StatusCode != http.StatusCreated || fr.StatusCode != lr.StatusCode || !bytes.Equal(lb, fb) {
		t.Fatalf("leader answered %d %s\nfollower answered %d %s", lr.StatusCode, lb, fr.StatusCode, fb)
	}
	for _, h := range []string{"Content-Type", "X-Echo"} {
		if fr.Header.Get(h) != lr.Header.Get(h) {
			t.Errorf("header %s: follower %q, leader %q", h, fr.Header.Get(h), lr.Header.Get(h))
		}
	}
	e := decode[echo](t, lb)
	want := echo{Node: c.Server(leader).ID(), Method: "PUT", Path: "/api/v2_beta/test/echo/a/b/c", Query: "x=1&y=two%20words",
		Auth: "Bearer " + c.AdminToken, Custom: "custom value", Body: `{"payload":[1,2,3]}`}
	if e != want {
		t.Fatalf("the leader saw %+v, want %+v", e, want)
	}
	if got := fr.Header.Get("X-Seen-Forwarded-By"); got != c.Server(follower).ID() {
		t.Errorf("forwarded by %q, want %s", got, c.Server(follower).ID())
	}
	if lr.Header.Get("X-Seen-Forwarded-By") != "" {
		t.Error("a request to the leader was marked forwarded")
	}
	if n := metrictest.Sum(t, c.Registry(follower), "squall_master_forwarded_requests_total", map[string]string{"result": "ok"}); n != 1 {
		t.Errorf("forwarded counter %v", n)
	}
}

// TestCluster_LoopProtection: a forwarded request that reaches a node
// that is not the leader is answered 503, not forwarded again.
func TestCluster_LoopProtection(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	leader, follower := c.Leader(), c.Followers()[0]
	do := func(i int) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.URL(i)+"/api/v2_beta/test/echo/x", nil)
		req.Header.Set(master.HeaderForwardedBy, "elsewhere")
		return calltest.Do(t, calltest.Client().Do, req)
	}
	start := time.Now()
	resp, body := do(follower)
	wantError(t, resp, body, http.StatusServiceUnavailable, "NO_LEADER")
	if resp.Header.Get(master.HeaderNotApplied) != "true" {
		t.Errorf("the refusal lacks %s: true", master.HeaderNotApplied)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %s: it waited instead of answering", took)
	}
	if n := metrictest.Sum(t, c.Registry(follower), "squall_master_forwarded_requests_total", map[string]string{"result": "ok"}); n != 0 {
		t.Errorf("the follower forwarded %v requests", n)
	}
	if resp, body := do(leader); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a forwarded request on the leader: %d %s", resp.StatusCode, body)
	}
}

// TestCluster_LeaderKilledMidStream kills the leader while writers write
// through every node: every acknowledged write survives, and a new leader
// serves within seconds.
func TestCluster_LeaderKilledMidStream(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	old := c.Leader()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var (
		mu       sync.Mutex
		acked    []string
		killedAt atomic.Pointer[time.Time]
		firstAck = make(chan time.Duration, 1)
		seq      atomic.Int64
		wg       sync.WaitGroup
	)
	targets := func() []int {
		var out []int
		for _, i := range c.Running() {
			if i != old || killedAt.Load() == nil {
				out = append(out, i)
			}
		}
		return out
	}
	const writers = 4
	for w := range writers {
		wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				tg := targets()
				i := tg[(w+k)%len(tg)]
				name := fmt.Sprintf("w%d", seq.Add(1))
				code, err := post(ctx, c.URL(i)+"/api/v2_beta/test/append/"+name)
				if err != nil || code != http.StatusOK {
					continue // unacknowledged: may or may not be applied
				}
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
				if at := killedAt.Load(); at != nil && i != old {
					select {
					case firstAck <- time.Since(*at):
					default:
					}
				}
			}
		})
	}
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	mastertest.WaitFor(t, 10*time.Second, func() bool { return ackCount() >= 20 }, "20 writes before the kill")
	now := time.Now()
	killedAt.Store(&now)
	c.Kill(old)
	var failover time.Duration
	select {
	case failover = <-firstAck:
	case <-time.After(10 * time.Second):
		t.Fatal("no write acknowledged within 10s of killing the leader")
	}
	before := ackCount()
	mastertest.WaitFor(t, 10*time.Second, func() bool { return ackCount() >= before+20 }, "20 writes after the failover")
	cancel()
	wg.Wait()
	t.Logf("failover: first write acknowledged %s after the kill; %d writes acknowledged", failover, ackCount())
	if failover > 5*time.Second {
		t.Errorf("failover took %s", failover)
	}

	c.Restart(old)
	c.WaitConverged()
	for _, i := range c.Running() {
		if got := childNames(c, i); !hasAll(got, acked) {
			t.Fatalf("node %d lost acknowledged writes: has %d names, %d acknowledged", i, len(got), len(acked))
		}
	}
}

// TestCluster_MinorityPartition cuts the leader off: it cannot commit
// (its requests fail with 503, never hang), the majority goes on, and the
// old leader catches up after healing.
func TestCluster_MinorityPartition(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI(), mastertest.WithConfig(func(_ int, cfg *master.Config) {
		cfg.LeaderWait = time.Second
	}))
	old := c.Leader()
	appendVia(t, c, old, "before")
	c.Partition(old)

	start := time.Now()
	resp, body := c.Do(old, http.MethodPost, "/api/v2_beta/test/append/minority", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("write on the cut-off leader: %d %s", resp.StatusCode, body)
	}
	t.Logf("the cut-off node refused the write after %s: %s", time.Since(start), bytes.TrimSpace(body))

	var majority []int
	for _, i := range c.Running() {
		if i != old {
			majority = append(majority, i)
		}
	}
	// The majority elects a new leader; on a busy machine that can take
	// longer than LeaderWait, so the write is retried while it is 503.
	idx := appendEventually(t, c, majority[0], "majority")
	// Still cut off: a read through it is refused too, not served stale.
	resp, body = c.Get(old, "/api/v2_beta/test/echo/x", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "NO_LEADER")

	c.Heal(old)
	c.WaitConverged()
	if _, i := c.Server(old).Store().Active(); i < idx {
		t.Fatalf("healed node at index %d, want at least %d", i, idx)
	}
	for _, i := range c.Running() {
		if got := childNames(c, i); !slices.Equal(got, []string{"before", "majority"}) {
			t.Fatalf("node %d after healing: %v", i, got)
		}
	}
	appendEventually(t, c, old, "after")
}

// TestCluster_NoLeader: with 2 of 3 nodes down, requests that need the
// leader are answered 503 with Retry-After and a JSON error within
// LeaderWait; health stays up, readiness goes down.
func TestCluster_NoLeader(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI(), mastertest.WithConfig(func(_ int, cfg *master.Config) {
		cfg.LeaderWait = time.Second
	}))
	leader := c.Leader()
	left := c.Followers()[0]
	for _, i := range c.Running() {
		if i != left {
			c.Kill(i)
		}
	}
	_ = leader
	for _, path := range []string{"/api/v2_beta/test/append/x", "/squall/v1/cluster/join"} {
		start := time.Now()
		var (
			resp *http.Response
			body []byte
		)
		if strings.HasSuffix(path, "/join") {
			// An authenticated join waits for the leader like the rest.
			resp, body = postJoin(t, c.URL(left), c.JoinToken(), `{"id":"x","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`)
		} else {
			resp, body = c.Do(left, http.MethodPost, path, c.AdminToken, []byte(`{}`))
		}
		took := time.Since(start)
		// The dead leader's ports are held open by mastertest, which
		// accepts connections and closes them: the follower's forward may
		// have reached it, so a POST may be answered LEADER_LOST (the
		// documented answer when the request may have been applied).
		var apiErr struct{ Code string }
		if json.Unmarshal(body, &apiErr) == nil && apiErr.Code == "LEADER_LOST" {
			wantError(t, resp, body, http.StatusServiceUnavailable, "LEADER_LOST")
		} else {
			wantError(t, resp, body, http.StatusServiceUnavailable, "NO_LEADER")
		}
		if took > 5*time.Second {
			t.Errorf("%s: 503 after %s", path, took)
		}
	}
	if resp, _ := c.Get(left, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz %d", resp.StatusCode)
	}
	mastertest.WaitFor(t, 5*time.Second, func() bool {
		resp, _ := c.Get(left, "/readyz", "")
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "readyz to fail")
	resp, body := c.Get(left, "/squall/v1/tree/active?index=0", viewToken(c))
	wantError(t, resp, body, http.StatusServiceUnavailable, "NOT_READY")
}

// TestCluster_FullRestart stops every node and starts them again: the
// state and the membership (with HTTP addresses) are kept.
func TestCluster_FullRestart(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	appendVia(t, c, 1, "a")
	appendVia(t, c, 2, "b")
	for i := range 3 {
		c.Stop(i)
	}
	for i := range 3 {
		c.Restart(i)
	}
	c.WaitConverged()
	for i := range 3 {
		if got := childNames(c, i); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("node %d after restart: %v", i, got)
		}
		if ids := memberIDs(t, c, i); len(ids) != 3 {
			t.Fatalf("node %d members %v", i, ids)
		}
	}
	appendVia(t, c, c.Followers()[0], "c")
}

// TestCluster_JoinAfterSnapshot: a node that joins after the leader
// snapshotted and truncated its log catches up from the snapshot.
func TestCluster_JoinAfterSnapshot(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI(), mastertest.WithStore(func(sc *store.Config) {
		sc.TrailingLogs = 2
		sc.SnapshotThreshold = 1 << 20 // only explicit snapshots
	}))
	var names []string
	for k := range 20 {
		names = append(names, fmt.Sprintf("n%d", k))
		appendVia(t, c, k%3, names[k])
	}
	leader := c.Server(c.Leader()).Store()
	if err := leader.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := leader.Stats(t.Context())
	if err != nil || st.LastSnapshotIndex == 0 {
		t.Fatalf("stats after snapshot %+v %v", st, err)
	}
	n := c.Add()
	c.WaitConverged()
	if got := childNames(c, n); !slices.Equal(got, names) {
		t.Fatalf("new node has %v", got)
	}
	if v := c.Counter(t, n, "squall_store_fsm_restores_total"); v < 1 {
		t.Fatalf("the new node did not restore a snapshot (restores %v)", v)
	}
	if ids := memberIDs(t, c, 0); len(ids) != 4 {
		t.Fatalf("members %v", ids)
	}
}

// TestCluster_RemoveMember removes a follower through another follower
// (forwarded to the leader): it leaves the configuration and its HTTP
// address is forgotten.
func TestCluster_RemoveMember(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3)
	fs := c.Followers()
	gone, via := fs[0], fs[1]
	goneID := c.Server(gone).ID()
	resp, body := c.Do(via, http.MethodDelete, "/squall/v1/cluster/members/"+goneID, viewToken(c), nil)
	wantError(t, resp, body, http.StatusForbidden, "FORBIDDEN")
	resp, body = c.Do(via, http.MethodDelete, "/squall/v1/cluster/members/"+goneID, "", nil)
	wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
	resp, body = c.Do(via, http.MethodDelete, "/squall/v1/cluster/members/"+goneID, c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK || string(bytes.TrimSpace(body)) != "null" {
		t.Fatalf("remove: %d %s", resp.StatusCode, body)
	}
	c.Kill(gone)
	mastertest.WaitFor(t, 5*time.Second, func() bool {
		_, body := c.Get(via, "/squall/v1/cluster", c.AdminToken)
		var info master.ClusterInfo
		if json.Unmarshal(body, &info) != nil || len(info.Members) != 2 {
			return false
		}
		for _, m := range info.Members {
			if m.ID == goneID || m.HTTPAddr == "" || m.Suffrage != "voter" {
				return false
			}
		}
		return c.Server(via).Store().HTTPAddr(goneID) == ""
	}, "the member to be gone everywhere")
	resp, body = c.Do(via, http.MethodDelete, "/squall/v1/cluster/members/"+goneID, c.AdminToken, nil)
	wantError(t, resp, body, http.StatusNotFound, "MEMBER_NOT_FOUND")
}

// TestCluster_RemoveLeader removes the leader itself (through a
// follower): the others elect a new leader among themselves.
func TestCluster_RemoveLeader(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	old := c.Leader()
	oldID := c.Server(old).ID()
	via := c.Followers()[0]
	resp, body := c.Do(via, http.MethodDelete, "/squall/v1/cluster/members/"+oldID, c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("remove the leader: %d %s", resp.StatusCode, body)
	}
	c.Kill(old)
	c.WaitConverged()
	if ids := memberIDs(t, c, via); len(ids) != 2 || slices.Contains(ids, oldID) {
		t.Fatalf("members %v", ids)
	}
	appendVia(t, c, via, "after")
}

// TestCluster_FollowerVerifiesBeforeForwarding: a follower never streams
// the body of a request whose bearer token does not verify to the leader;
// it answers 401 itself. Without a body (nothing to stream) the leader
// decides, as for every other request.
func TestCluster_FollowerVerifiesBeforeForwarding(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	leader := c.Leader()
	follower := c.Followers()[0]
	for _, tok := range []string{"", "garbage", c.AdminToken + "x"} {
		resp, body := c.Do(follower, http.MethodPut, "/api/v2_beta/test/echo/a", tok, bytes.Repeat([]byte("x"), 4<<10))
		wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
	}
	if n := metrictest.Sum(t, c.Registry(follower), "squall_master_forwarded_requests_total", map[string]string{"result": "ok"}); n != 0 {
		t.Errorf("%v requests with a body and a bad token were forwarded to the leader %d", n, leader)
	}
	resp, _ := c.Do(follower, http.MethodPut, "/api/v2_beta/test/echo/a", c.AdminToken, []byte(`{}`))
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a good token through the follower: %d", resp.StatusCode)
	}
}

// TestCluster_LeaderUnavailable: a request whose wait for a leader ends
// while a leader is known (unreachable, or not confirmed by a quorum in
// time) is answered 503 LEADER_UNAVAILABLE naming that leader, not
// NO_LEADER, whose message would then contradict its code. (With none
// known it is NO_LEADER: TestCluster_NoLeader.)
func TestCluster_LeaderUnavailable(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	s := c.Server(0)
	id, _ := s.Store().Leader()
	if id != s.ID() {
		t.Fatalf("leader %q, want %q", id, s.ID())
	}
	rec := httptest.NewRecorder()
	s.WriteLeaderError(rec, httptest.NewRequest(http.MethodGet, "/squall/v1/backup", nil))
	resp := rec.Result()
	body := rec.Body.Bytes()
	wantError(t, resp, body, http.StatusServiceUnavailable, "LEADER_UNAVAILABLE")
	var e apiErr
	if err := json.Unmarshal(body, &e); err != nil || e.Params["LEADER"] != id || !strings.Contains(e.Message, "leader "+id+" could not serve") {
		t.Fatalf("answer %s, want params.LEADER %q named in the message", body, id)
	}
}
