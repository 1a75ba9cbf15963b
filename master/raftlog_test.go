package master_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/mastertest"
)

// TestCluster_PlannedStopLogs: a master stopped gracefully (a planned
// SIGTERM) and started again makes the others log no error: the failed
// raft RPCs to it are one warning per survivor while it is down, and one
// line when it answers again. raft itself logged each retry at error level
// (20-80 lines per survivor); they are at debug now, and the test waits
// for 10 of them so that the outage is long enough to have made as many.
func TestCluster_PlannedStopLogs(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3)
	for _, stop := range []struct {
		name string
		node func() int
	}{
		{"the leader", c.Leader},
		{"a follower", func() int { return c.Followers()[0] }},
	} {
		stopped := stop.node()
		survivors := map[int]int{} // node → length of its log before the stop
		for _, i := range c.Running() {
			if i != stopped {
				survivors[i] = len(c.Log(i))
			}
		}
		c.Stop(stopped)
		leader := c.Leader()
		const retries = 10
		mastertest.WaitFor(t, mastertest.Timeout, func() bool {
			return strings.Count(c.Log(leader)[survivors[leader]:], `msg="failed to heartbeat to"`) >= retries
		}, fmt.Sprintf("%d failed heartbeats to the stopped node", retries))
		c.Restart(stopped)
		c.WaitConverged()
		mastertest.WaitFor(t, mastertest.Timeout, func() bool {
			return strings.Contains(c.Log(leader)[survivors[leader]:], `msg="raft peer reachable again"`)
		}, "the leader's line saying the stopped node is back")

		for i, from := range survivors {
			var errs, warns []string
			for line := range strings.SplitSeq(c.Log(i)[from:], "\n") {
				switch {
				case strings.Contains(line, "level=ERROR"):
					errs = append(errs, line)
				case strings.Contains(line, "level=WARN"):
					warns = append(warns, line)
				}
			}
			t.Logf("%s stopped: node %d logged %d errors and %d warnings", stop.name, i, len(errs), len(warns))
			if len(errs) > 0 {
				t.Errorf("%s stopped: node %d logged %d errors:\n%s", stop.name, i, len(errs), strings.Join(errs, "\n"))
			}
			if len(warns) > 3 {
				t.Errorf("%s stopped: node %d logged %d warnings, want at most 3:\n%s", stop.name, i, len(warns), strings.Join(warns, "\n"))
			}
		}
	}
}
