package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/backtests"
)

// The load of BenchmarkBacktestLiveLag: SQUALL_LAG_RATE events/s (default
// 1,000) written to the topic in batches every 10 ms, a backlog of
// lagBacklog events for the backtests, each phase measured for lagPhase
// at least.
const (
	lagBacklog    = 150_000
	lagPhase      = 15 * time.Second
	lagPartitions = 3
	lagGroup      = "squall-lag"
)

// lagTreeJSON is a 200-rule tree routed by tenant (10 tenant filters of
// 5 rulesets of 4 rules, each an equals on the type, a contains and a
// regex on the host), without actions; with changed, two rules of the
// first tenant test another type.
func lagTreeJSON(changed bool) []byte {
	var tenants []string
	for t := range 10 {
		var rulesets []string
		for s := range 5 {
			var rules []string
			for r := range 4 {
				typ := fmt.Sprintf("type_%d", (s*4+r)%10)
				if changed && t == 0 && s == 0 && r < 2 {
					typ = "type_changed"
				}
				rules = append(rules, fmt.Sprintf(`{"name": "rule_%d", "description": "", "continue": true, "active": true,
					"constraint": {"WHERE": {"type": "AND", "operators": [
						{"type": "equals", "first": "${event.type}", "second": %q},
						{"type": "contains", "first": "${event.payload.host}", "second": "srv"},
						{"type": "regex", "regex": "srv-[0-9]+", "target": "${event.payload.host}"}]}, "WITH": {}}, "actions": []}`, r, typ))
			}
			rulesets = append(rulesets, fmt.Sprintf(`{"Ruleset": {"name": "ruleset_%d", "rules": [%s]}}`, s, strings.Join(rules, ",")))
		}
		tenants = append(tenants, fmt.Sprintf(`{"Filter": {"name": "tenant_%d", "filter": {"description": "", "active": true,
			"filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "tenant_%d"}}, "nodes": [%s]}}`, t, t, strings.Join(rulesets, ",")))
	}
	return fmt.Appendf(nil, `{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": {}}, "nodes": [%s]}}`,
		strings.Join(tenants, ","))
}

// lagEvent is the i-th event: about 1 KB.
func lagEvent(i int) []byte {
	return fmt.Appendf(nil, `{"type": "type_%d", "created_ms": %d, "metadata": {"tenant_id": "tenant_%d"},
		"payload": {"host": "srv-%d.example.com", "severity": "warning", "message": "%0800d"}}`, i%10, time.Now().UnixMilli(), i%10, i, i)
}

// lagSamples are the consumer group's lag (end offsets minus committed
// offsets, summed over the partitions) sampled every 250 ms.
type lagSamples []int64

func (s lagSamples) summary() string {
	if len(s) == 0 {
		return "no sample"
	}
	c := slices.Clone(s)
	slices.Sort(c)
	q := func(p float64) int64 { return c[min(len(c)-1, int(p*float64(len(c))))] }
	return fmt.Sprintf("p50 %d, p99 %d, max %d events (%d samples)", q(0.5), q(0.99), c[len(c)-1], len(c))
}

// procCPU returns the CPU time (user and system) process pid used so
// far, from /proc (Linux); false elsewhere.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 12th and 13th, in clock ticks
	// (100 a second on Linux).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * 10 * time.Millisecond, true
}

// BenchmarkBacktestLiveLag measures the live pipeline's lag while a backtest
// runs on the same engine (docs/BENCHMARKS.md, "Backtest"): real
// processes (a master and an engine; the broker and the load in this
// process), a steady load of lagRate events/s that the engine consumes,
// and backtests of a 200-rule tree over a backlog of lagBacklog events:
// at full speed (--backtest-cpu 1, no lag guard), with the engine's
// defaults, then with a quarter of a core; the engine's CPU (from /proc)
// shows the budget's bound. It measures and logs its figures, once
// whatever b.N; it fails only when the engine did not keep up in the end:
//
//	[SQUALL_LAG_RATE=3000] go test ./cmd/squall -run '^$' -bench BacktestLiveLag -benchtime 1x -v -timeout 10m
func BenchmarkBacktestLiveLag(bm *testing.B) {
	var t testing.TB = bm
	lagRate := 1000
	if v := os.Getenv("SQUALL_LAG_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n%100 != 0 {
			t.Fatalf("SQUALL_LAG_RATE %q: want a multiple of 100", v)
		}
		lagRate = n
	}
	const topic = "squall.events"
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic, "squall.events.dlq"}, Partitions: lagPartitions})
	dir := t.TempDir()
	base := startMaster(t, "--allow-unsigned-tokens")
	_, admin := adminTokenFile(t, dir)
	engineToken := filepath.Join(dir, "engine.token")
	writeFile(t, engineToken, mustRun(t, "token", "--user", "engine", "--auth", "all=root:view,fleet_report", "--unsigned"))
	apitest.DeployTree(t, base, admin, lagTreeJSON(false))
	draftID, code, body := apitest.ImportTree(t, base, admin, "root", lagTreeJSON(true))
	if code != 200 {
		t.Fatalf("import the draft: %d %s", code, body)
	}
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{b.Addr}, Timeout: 5 * time.Second}, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The backlog the backtests read, written before the engine joins
	// (it starts at the end of the topic).
	for i := 0; i < lagBacklog; i += 1000 {
		var recs []kafkasource.Record
		for j := i; j < i+1000; j++ {
			recs = append(recs, kafkasource.Record{Value: lagEvent(j)})
		}
		if err := w.Write(t.Context(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	startEngine := func(name string, args ...string) *proctest.Proc {
		t.Helper()
		e := startE2E(t, name, append([]string{"engine", "--name", name, "--master", base,
			"--token-file", engineToken, "--kafka-brokers", b.Addr, "--group", lagGroup, "--http", "127.0.0.1:0",
			"--kafka-start-offset", "latest", "--fleet-interval", "1s"}, args...)...)
		proctest.Wait(t, e2eStartupTimeout, "the engine ready", []*proctest.Proc{e}, func() bool { return engineStatus(e).Ready })
		return e
	}

	// The steady load, in its own goroutine for the whole test.
	ctx, cancel := context.WithCancel(t.Context())
	var load sync.WaitGroup
	t.Cleanup(func() { cancel(); load.Wait() })
	var written atomic.Int64
	load.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := lagBacklog; ctx.Err() == nil; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var recs []kafkasource.Record
			for range lagRate / 100 {
				recs = append(recs, kafkasource.Record{Value: lagEvent(i)})
				i++
			}
			if err := w.Write(ctx, recs...); err != nil && ctx.Err() == nil {
				t.Errorf("steady load: %v", err)
				return
			}
			written.Add(int64(len(recs)))
		}
	})
	groupLag := func() int64 {
		var sum int64
		committed := b.Committed(t, lagGroup, topic)
		for p, end := range b.EndOffsets(t, topic) {
			sum += end - committed[p]
		}
		return sum
	}
	// sample reads the lag every 250 ms until done is closed.
	sample := func(done <-chan struct{}) lagSamples {
		var s lagSamples
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return s
			case <-tick.C:
				s = append(s, groupLag())
			}
		}
	}
	// measureDuring samples the lag while a backtest of the backlog runs.
	client, err := backtests.NewClient([]string{base}, admin, calltest.Client())
	if err != nil {
		t.Fatal(err)
	}
	var engine *proctest.Proc
	// usage says the engine's CPU per second of wall time and the load's
	// rate since cpu0, w0 at at0.
	usage := func(cpu0 time.Duration, w0 int64, at0 time.Time) string {
		cpu, _ := procCPU(engine.Cmd.Process.Pid)
		secs := time.Since(at0).Seconds()
		return fmt.Sprintf("engine CPU %.2f cores; load %.0f events/s", (cpu-cpu0).Seconds()/secs, float64(written.Load()-w0)/secs)
	}
	measureDuring := func(what string) {
		t.Helper()
		cpu0, _ := procCPU(engine.Cmd.Process.Pid)
		w0, at0 := written.Load(), time.Now()
		done := make(chan struct{})
		var samples lagSamples
		var sampled sync.WaitGroup
		sampled.Go(func() { samples = sample(done) })
		bt, err := client.Run(t.Context(), backtests.Request{Draft: draftID, Last: lagBacklog / lagPartitions, Sample: -1}, 250*time.Millisecond, nil)
		close(done)
		sampled.Wait()
		used := usage(cpu0, w0, at0)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: backtest of %d events at %.0f events/s in %s; group lag %s; %s", what, bt.Result.Events, bt.Result.Rate,
			bt.Result.Elapsed.Round(time.Millisecond), samples.summary(), used)
	}
	measureAlone := func(what string) {
		t.Helper()
		cpu0, _ := procCPU(engine.Cmd.Process.Pid)
		w0, at0 := written.Load(), time.Now()
		done := make(chan struct{})
		time.AfterFunc(lagPhase, func() { close(done) })
		s := sample(done)
		t.Logf("%s: group lag %s; %s", what, s.summary(), usage(cpu0, w0, at0))
	}

	engine = startEngine("lag-full", "--backtest-cpu", "1", "--backtest-max-lag", "0")
	measureAlone("steady load alone")
	measureDuring("beside a backtest at full speed (--backtest-cpu 1, --backtest-max-lag 0)")
	engine.Stop(t)
	engine = startEngine("lag-default")
	proctest.Wait(t, time.Minute, "the restarted engine caught up", nil, func() bool { return groupLag() < int64(lagRate) })
	measureAlone("steady load alone, after the restart")
	measureDuring("beside a backtest with the defaults (--backtest-cpu 0.5, --backtest-max-lag 1000)")
	engine.Stop(t)
	engine = startEngine("lag-quarter", "--backtest-cpu", "0.25")
	proctest.Wait(t, time.Minute, "the restarted engine caught up", nil, func() bool { return groupLag() < int64(lagRate) })
	measureDuring("beside a backtest with a quarter of a core (--backtest-cpu 0.25)")
	proctest.Wait(t, time.Minute, "the engine caught up", nil, func() bool { return groupLag() < int64(lagRate) })
}
