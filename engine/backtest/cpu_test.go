package backtest

import (
	"context"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/kafkatest"
)

// memReader serves one partition of repeat copies of msgs from memory, so
// that a backtest's CPU is its own (no broker in the process's time).
type memReader struct {
	msgs []*kafkasource.Message
	end  int64
}

func (m *memReader) Partitions(context.Context, string) ([]kafkasource.PartitionRange, error) {
	return []kafkasource.PartitionRange{{Partition: 0, First: 0, End: m.end}}, nil
}

func (m *memReader) OffsetAt(context.Context, string, int, time.Time) (int64, error) { return 0, nil }

func (m *memReader) Read(_ context.Context, _ string, _ int, from, end int64, _ int, fn func(*kafkasource.Message) bool) (int64, error) {
	for ; from < end; from++ {
		if !fn(m.msgs[from%int64(len(m.msgs))]) {
			return from + 1, nil
		}
	}
	return from, nil
}

// TestBacktest_cpu measures the process's CPU time while a backtest runs
// with a budget of a quarter of a core: its share of the wall time stays
// near the budget (the garbage collector's workers, which the budget does
// not see, add a little), where the same backtest without a budget uses
// a whole core. Not parallel: the process's CPU time is the backtest's.
func TestBacktest_cpu(t *testing.T) {
	if _, ok := cputime.Thread(); !ok {
		t.Skip("no thread CPU time on this platform")
	}
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1})
	produce(t, b.Addr, 0, 500, func(int) time.Time { return time.Now() })
	kr := newReader(t, b.Addr)
	var msgs []*kafkasource.Message
	if _, err := kr.Read(t.Context(), testTopic, 0, 0, 500, 64<<20, func(m *kafkasource.Message) bool {
		msgs = append(msgs, m)
		return true
	}); err != nil || len(msgs) != 500 {
		t.Fatalf("read %d messages: %v", len(msgs), err)
	}
	active, candidate := testTrees(t)
	measure := func(n int64, share float64) (cpu, wall time.Duration) {
		t.Helper()
		bt, err := New(&memReader{msgs: msgs, end: n}, Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: n}, CPU: share})
		if err != nil {
			t.Fatal(err)
		}
		cpu0, _ := cputime.Process()
		start := time.Now()
		res, err := bt.Run(t.Context())
		wall = time.Since(start)
		cpu1, _ := cputime.Process()
		if err != nil || res.Events != n {
			t.Fatalf("%d events: %v", res.Events, err)
		}
		return cpu1 - cpu0, wall
	}
	// Calibrate: the CPU of one event without a budget.
	cpu, wall := measure(2000, 0)
	perEvent := cpu / 2000
	t.Logf("no budget: %d events, CPU %s in %s (%.2f of a core)", 2000, cpu, wall, cpu.Seconds()/wall.Seconds())
	// About 250 ms of CPU under a budget of 0.25: about a second.
	const share = 0.25
	n := int64(250*time.Millisecond/perEvent) + 1
	cpu, wall = measure(n, share)
	used := cpu.Seconds() / wall.Seconds()
	t.Logf("budget %.2f: %d events, CPU %s in %s (%.2f of a core)", share, n, cpu, wall, used)
	if used > share*1.5 {
		t.Errorf("a backtest with a budget of %.2f of a core used %.2f", share, used)
	}
	if wall < time.Duration(float64(cpu)/(share*1.5)) {
		t.Errorf("%s of CPU in %s", cpu, wall)
	}
}
