package master_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// BenchmarkFailover measures what a client sees when the leader of a
// 3-node cluster dies: the time from killing the leader until a write
// sent to a surviving node is acknowledged by the new leader. The client
// retries 503s every 10ms (it would honour Retry-After in real life).
// Each iteration builds a new cluster; the figures are the custom
// metrics (failover-ms is the median of the iterations), not ns/op.
//
//	go test -run '^$' -bench Failover -benchtime 10x ./master
func BenchmarkFailover(b *testing.B) {
	for _, tc := range []struct {
		name string
		// heartbeat is raft's heartbeat and election timeout; 0 keeps
		// the defaults (1s, lease 500ms).
		heartbeat time.Duration
	}{
		{"default", 0},
		{"heartbeat=300ms", 300 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				took = append(took, failoverOnce(b, tc.heartbeat))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "failover-ms")
			b.ReportMetric(float64(took[len(took)-1])/float64(time.Millisecond), "max-ms")
		})
	}
}

func failoverOnce(b *testing.B, heartbeat time.Duration) time.Duration {
	c := mastertest.TestCluster(b, 3, mountTestAPI(), mastertest.WithStore(func(sc *store.Config) {
		sc.NoSync = false
		sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = heartbeat, heartbeat, heartbeat/2
		sc.CommitTimeout = 0
	}))
	defer func() {
		for _, i := range c.Running() {
			c.Kill(i)
		}
	}()
	leader := c.Leader()
	survivor := c.Followers()[0]
	url := c.URL(survivor) + "/api/v2_beta/test/append/"
	if code, err := post(b.Context(), url+"warm"); err != nil || code != http.StatusOK {
		b.Fatalf("warm-up write: %d %v", code, err)
	}
	start := time.Now()
	c.Kill(leader)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	for k := 0; ; k++ {
		code, err := post(ctx, fmt.Sprintf("%sw%d", url, k))
		if err == nil && code == http.StatusOK {
			return time.Since(start)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.Fatal("no write acknowledged within 30s of killing the leader")
		}
	}
}

// BenchmarkRequest measures sequential requests to a 3-node cluster (raft
// log with fsync) sent to the leader and to a follower, which forwards
// them: echo reaches an OnLeader handler that does nothing (the cost of
// ConsistentRead, and of the proxy hop); write replaces the active tree
// with a small one (one raft command).
func BenchmarkRequest(b *testing.B) {
	c := mastertest.TestCluster(b, 3, mountTestAPI(), mastertest.WithStore(func(sc *store.Config) { sc.NoSync = false }))
	leader, follower := c.Leader(), c.Followers()[0]
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		name, method, path string
		node               int
	}{
		{"echo/leader", http.MethodGet, "/api/v2_beta/test/echo/x", leader},
		{"echo/follower", http.MethodGet, "/api/v2_beta/test/echo/x", follower},
		{"write/leader", http.MethodPost, "/api/v2_beta/test/replace/x", leader},
		{"write/follower", http.MethodPost, "/api/v2_beta/test/replace/x", follower},
	} {
		b.Run(tc.name, func(b *testing.B) {
			url := c.URL(tc.node) + tc.path
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequestWithContext(b.Context(), tc.method, url, nil)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					b.Fatalf("%s: %d", tc.name, resp.StatusCode)
				}
			}
		})
	}
}
