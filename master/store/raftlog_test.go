package store

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type stringer struct{}

func (stringer) String() string { return "Node at 127.0.0.1:7000 [Candidate]" }

// TestRaftLogger: raft's records keep the store's keys once (raft's "node"
// is renamed), and values that describe themselves are written as text.
func TestRaftLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, nil)).With("node", "n1")
	l := newRaftLogger(base, "raft")
	l.Info("entering candidate state", "node", stringer{}, "term", 2, "wait", 1500*time.Millisecond, "f", hclog.Fmt("%d peers", 3))
	line := buf.String()
	if strings.Count(line, `"node":`) != 1 {
		t.Errorf("node given twice: %s", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m["node"] != "n1" || m["raft_node"] != "Node at 127.0.0.1:7000 [Candidate]" || m["wait"] != "1.5s" || m["f"] != "3 peers" || m["component"] != "raft" {
		t.Errorf("record %v", m)
	}
}
