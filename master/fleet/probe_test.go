package fleet_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/mastertest"
)

// mountFleet mounts the fleet API on s as squall master does: masters
// from the store's configuration, served on the leader.
func mountFleet(t *testing.T, s *master.Server) {
	cfg := fleet.Default()
	// A loaded machine running the race detector may take seconds to
	// answer; the test is about what the masters say, not how fast.
	cfg.ProbeTimeout = 15 * time.Second
	f := fleet.New(cfg, s.Verifier(), s.FleetMasters, nil)
	for _, p := range []string{fleet.Pattern, fleet.Pattern + "/"} {
		if err := s.Mount(p, f.Handler(), master.OnLeader); err != nil {
			t.Error(err)
		}
	}
}

// TestFleet_Masters: in a real three-node cluster, the list read through a
// follower shows each master's own version, raft state and indexes and
// its health; a heartbeat sent to a follower reaches the list; a stopped
// master is listed as unreachable, with the reason.
func TestFleet_Masters(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3,
		mastertest.WithConfig(func(i int, cfg *master.Config) { cfg.Version = fmt.Sprintf("squall test-%d", i) }),
		mastertest.WithSetup(func(_ int, s *master.Server) { mountFleet(t, s) }))
	view := c.Token(auth.Claims{User: "ops", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"view"}}}})
	reporter := c.Token(auth.Claims{User: "sat", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"fleet_report"}}}})
	f := c.Followers()
	// A loaded machine may see an election (503 NO_LEADER): the test
	// waits for the answers it wants, with a deadline.
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last answer: %s", last)
		}
	})
	mastertest.WaitFor(t, 30*time.Second, func() bool {
		resp, body := c.Do(f[0], http.MethodPut, fleet.Pattern+"/satellite/s1", reporter, []byte(`{"ready": true, "spool_depth": 2, "webhooks_loaded": 5}`))
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK
	}, "a heartbeat through a follower")
	mastertest.WaitFor(t, 30*time.Second, func() bool {
		resp, body := c.Do(f[0], http.MethodPost, fleet.Pattern, view, []byte(`{}`))
		last = fmt.Sprintf("%d %q %s", resp.StatusCode, resp.Header.Get("Allow"), body)
		return resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "GET, HEAD"
	}, "405 for POST on the list through a follower")
	list := func(i int) map[string]fleet.Member {
		t.Helper()
		resp, body := c.Get(i, fleet.Pattern, view)
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		var l struct {
			Members []fleet.Member `json:"members"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &l) != nil {
			return nil
		}
		out := map[string]fleet.Member{}
		for _, m := range l.Members {
			out[m.Role+"/"+m.ID] = m
		}
		return out
	}
	// Every master's own answers: its version (set per node), health,
	// raft state and indexes; one leader, and it says Leader.
	mastertest.WaitFor(t, 30*time.Second, func() bool {
		ms := list(f[1])
		if ms == nil {
			return false
		}
		leaders := 0
		for i := range 3 {
			m, ok := ms["master/"+c.Server(i).ID()]
			if !ok || m.Version != fmt.Sprintf("squall test-%d", i) || m.Health != fleet.HealthReady || !m.Ready ||
				m.AppliedIndex == nil || *m.AppliedIndex == 0 || m.CommitIndex == nil || *m.CommitIndex == 0 || m.Term == nil ||
				(m.State == "Leader") != m.Leader {
				return false
			}
			if m.Leader {
				leaders++
			}
		}
		s := ms["satellite/s1"]
		return leaders == 1 && s.SpoolDepth != nil && *s.SpoolDepth == 2 && !s.Stale
	}, "every master's own state in the list")

	stopped := f[0]
	c.Stop(stopped)
	mastertest.WaitFor(t, 30*time.Second, func() bool {
		ms := list(c.Leader())
		m := ms["master/"+c.Server(stopped).ID()]
		return ms != nil && m.Health == fleet.HealthUnreachable && !m.Ready && len(m.Reasons) > 0 && m.AppliedIndex == nil
	}, "the stopped master listed as unreachable")
}
