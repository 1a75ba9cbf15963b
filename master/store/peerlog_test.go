package store

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/squallhq/squall/internal/logtest"
)

// TestPeerWatch: an outage of a peer is a warning at its first failed
// RPC, a reminder every minute while it lasts, and one line when the peer
// answers again; raft's own lines about each failed RPC go to debug.
func TestPeerWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, buf := logtest.New(slog.LevelInfo)
		w := newPeerWatch(log)
		refused := errors.New("connection refused")
		w.result("m2", "10.0.0.2:7000", nil) // a peer that answers: nothing to say
		for range 150 {                      // 2.5 minutes of failed heartbeats
			w.result("m2", "10.0.0.2:7000", refused)
			time.Sleep(time.Second)
		}
		w.result("m2", "10.0.0.2:7000", nil)
		w.result("m2", "10.0.0.2:7000", nil)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		want := []string{
			`level=WARN msg="raft peer unreachable" peer=m2 addr=10.0.0.2:7000 error="connection refused"`,
			`level=WARN msg="raft peer still unreachable" peer=m2 addr=10.0.0.2:7000 unreachable_for=1m0s failed_attempts=61 error="connection refused"`,
			`level=WARN msg="raft peer still unreachable" peer=m2 addr=10.0.0.2:7000 unreachable_for=2m0s failed_attempts=121 error="connection refused"`,
			`level=INFO msg="raft peer reachable again" peer=m2 addr=10.0.0.2:7000 unreachable_for=2m30s failed_attempts=150`,
		}
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
		}
		for i, l := range lines {
			if !strings.HasSuffix(l, want[i]) {
				t.Errorf("line %d:\n%s\nwant it to end with\n%s", i, l, want[i])
			}
		}
	})
	t.Run("raft's lines", func(t *testing.T) {
		log, buf := logtest.New(slog.LevelInfo)
		r := newRaftLogger(log, "raft")
		r.Error("failed to heartbeat to", "peer", "10.0.0.2:7000", "error", "EOF")
		r.Error("failed to appendEntries to", "peer", "m2", "error", "EOF")
		r.Warn("failed to contact", "server-id", "m2", "time", time.Second)
		r.Error("failed to install snapshot", "peer", "m2", "error", "EOF")
		if buf.String() != "" {
			t.Errorf("failed RPCs to a peer logged at info or above:\n%s", buf.String())
		}
		r.Error("failed to install snapshot", "error", "disk full") // the follower's own
		r.Log(hclog.Error, "failed to commit logs", "error", "disk full")
		if n := strings.Count(buf.String(), "level=ERROR"); n != 2 {
			t.Errorf("%d errors, want 2:\n%s", n, buf.String())
		}
	})
}
