package kafkasource

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

// TestSource_MemberKilledWhileJoining kills a member at each stage of
// joining the group (killStages: its connections all close at once, as
// a SIGKILL closes them), beside a member that owns every partition or
// alone before another member starts. Every partition has a live owner
// again within the session timeout plus two heartbeats and a second (a
// join and a sync) of the kill, and keeps it: the coordinator removes a
// member silent for a session timeout whatever the stage it died at
// (docs/RELIABILITY.md, "A member killed while it joins").
func TestSource_MemberKilledWhileJoining(t *testing.T) {
	t.Parallel()
	const parts = 4
	for _, beside := range []bool{true, false} {
		for _, st := range killStages {
			name := "alone/" + st.name
			if beside {
				name = "beside a live member/" + st.name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: parts})
				cfg := testSourceConfig(b.Addr, "kill")
				// Longer than the session timeout, so that a member
				// removed by the rebalance timeout, not by its
				// silence, misses the bound.
				cfg.RebalanceTimeout = 10 * time.Second
				bound := cfg.SessionTimeout + 2*cfg.HeartbeatInterval + time.Second
				var live *Source
				if beside {
					live = openSource(t, cfg)
					polltest.Wait(t, "the live member to own every partition", 10*time.Second, func() bool { return ownsAll(live, parts) })
				}
				p := newMemberProcess(st.at)
				dcfg := cfg
				dcfg.netDial = p.dial
				openSource(t, dcfg)
				select {
				case <-p.killed:
				case <-time.After(20 * time.Second):
					t.Fatalf("the member never reached its kill point; its requests by API key: %v", p.requests())
				}
				killed := time.Now()
				if !beside {
					live = openSource(t, cfg)
				}
				// The live member owns every partition from since on,
				// for a session timeout: a dead member still in the
				// group would have had them back by then.
				var since time.Time
				if !polltest.Until(t.Context(), bound+cfg.SessionTimeout+10*time.Second, func() bool {
					if !ownsAll(live, parts) {
						since = time.Time{}
						return false
					}
					if since.IsZero() {
						since = time.Now()
					}
					return time.Since(since) >= cfg.SessionTimeout
				}) {
					t.Fatalf("the live member owns %v of the %d partitions %s after the kill; %s", live.Assignment().Partitions, parts,
						time.Since(killed).Round(10*time.Millisecond), describeGroup(t, b.Addr, cfg.Group))
				}
				took := max(since.Sub(killed), 0)
				t.Logf("every partition has a live owner %s after the kill", took.Round(10*time.Millisecond))
				if took > bound {
					t.Errorf("every partition has a live owner %s after the kill, want at most %s", took.Round(10*time.Millisecond), bound)
				}
			})
		}
	}
}

// ownsAll reports whether s is in a generation with every one of the
// topic's parts partitions.
func ownsAll(s *Source, parts int) bool {
	a := s.Assignment()
	return a.Joined && len(a.Partitions) == parts
}

// describeGroup returns the members of group as the broker sees them,
// for the failure messages.
func describeGroup(t *testing.T, addr, group string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics())
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "group %s state %s protocol %s:", g.Group, g.State, g.Protocol)
		for _, m := range g.Members {
			fmt.Fprintf(&b, " member %s from %s;", m.MemberID, m.ClientHost)
		}
	}
	return b.String()
}
