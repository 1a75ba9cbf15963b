package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/backtests"
)

// TestBacktestLeaderChange: a backtest's existence is replicated when it
// is asked for, its progress stays in the leader's memory (decision 64).
// When the leader dies while an engine runs one, the new leader answers
// it failed ("the leader changed while it ran; ask again"), the engine
// stops it at its next report (no backtest runs on for nobody), and a new
// one runs on the same engine through the new leader. Real processes:
// three masters, an engine, the broker in this process.
func TestBacktestLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with real processes: skipped in -short mode")
	}
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: 3})
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{b.Addr}, Timeout: 5 * time.Second}, Topic: "squall.events"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []kafkasource.Record
	for i := range 3000 {
		recs = append(recs, kafkasource.Record{Value: fmt.Appendf(nil, `{"type": "bt", "created_ms": 1, "payload": {"id": "bt-%d", "kind": %q}}`, i, btKind(i))})
	}
	if err := w.Write(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, admin := adminTokenFile(t, dir)
	masters := startMasterCluster(t, dir, admin, "--allow-unsigned-tokens")
	m1, m2, m3 := masters[0], masters[1], masters[2]
	apitest.DeployTree(t, m1.Base, admin, btTreeJSON(btActive, "http://127.0.0.1:1/unused"))
	draftID, code, body := apitest.ImportTree(t, m1.Base, admin, "root", btTreeJSON(btDraft, "http://127.0.0.1:1/unused"))
	if code != http.StatusOK {
		t.Fatalf("import the draft: %d %s", code, body)
	}
	engineToken := filepath.Join(dir, "engine.token")
	writeFile(t, engineToken, mustRun(t, "token", "--user", "engine", "--auth", "all=root:view,fleet_report", "--unsigned"))
	urls := []string{m1.Base, m2.Base, m3.Base}
	engine := startE2E(t, "engine", "engine", "--name", "engine-1", "--master", strings.Join(urls, ","),
		"--token-file", engineToken, "--kafka-brokers", b.Addr, "--http", "127.0.0.1:0", "--backtest-rate", "200")
	all := append([]*proctest.Proc{engine}, masters...)
	c, err := backtests.NewClient(urls, admin, calltest.Client())
	if err != nil {
		t.Fatal(err)
	}
	// 3,000 events at 200/s: 15 s, time enough to kill the leader.
	bt, err := c.Start(t.Context(), backtests.Request{Draft: draftID, Last: 1000})
	if err != nil {
		t.Fatal(err)
	}
	proctest.Wait(t, 30*time.Second, "the backtest running on the engine", all, func() bool {
		got, err := c.Get(t.Context(), bt.ID)
		return err == nil && got.State == backtests.StateRunning && got.Progress != nil && got.Progress.Read > 0
	})
	leaderID := agreedLeader(masters, admin, "")
	var survivors []*proctest.Proc
	for _, m := range masters {
		if m.Name == leaderID {
			m.Kill()
		} else {
			survivors = append(survivors, m)
		}
	}
	proctest.Wait(t, 30*time.Second, "a new leader", all, func() bool { return agreedLeader(survivors, admin, leaderID) != "" })
	c2, err := backtests.NewClient([]string{survivors[0].Base, survivors[1].Base}, admin, calltest.Client())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c2.Get(t.Context(), bt.ID); err != nil || got.State != backtests.StateFailed || got.Error != backtests.LeaderChangedError {
		t.Errorf("the backtest through the new leader: %+v, %v; want failed: %s", got, err, backtests.LeaderChangedError)
	}
	proctest.Wait(t, 30*time.Second, "the engine stopping the backtest the new leader does not know", all, func() bool {
		return strings.Contains(engine.Logs.String(), "backtest stopped: the masters no longer know it on this engine")
	})
	// The engine is free for the next one.
	done, err := c2.Run(t.Context(), backtests.Request{Draft: draftID, Last: 10}, 100*time.Millisecond, nil)
	if err != nil || done.State != backtests.StateSucceeded || done.Engine != "engine-1" || done.Result.Events != 30 {
		t.Errorf("a backtest after the leader change: %+v, %v", done, err)
	}
}
