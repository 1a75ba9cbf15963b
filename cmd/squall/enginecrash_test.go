package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/polltest"
)

// TestEngineTakeover measures, with real processes and the default Kafka
// timeouts, how long the partitions of a SIGKILLed engine wait for the
// other engine of its group: at most 10s (docs/operations.md). The
// survivor then processes events of every partition, into the archive
// directory both engines share.
func TestEngineTakeover(t *testing.T) {
	t.Parallel()
	w := newEngineWorld(t, 4)
	addr, archive := w.addr, w.archive
	pa, pb := w.startEngine(t, "takeover-test", "--name", "engine-a"), w.startEngine(t, "takeover-test", "--name", "engine-b")

	// A separate process gives no signal to wait on: poll, bounded.
	if !polltest.Until(t.Context(), 60*time.Second, func() bool {
		sa, sb := engineStatus(pa), engineStatus(pb)
		return sa.Ready && sb.Ready && len(sa.Partitions) == 2 && len(sb.Partitions) == 2
	}) {
		t.Fatalf("the engines do not share the 4 partitions: %v and %v\n%s\n%s",
			engineStatus(pa).Partitions, engineStatus(pb).Partitions, pa.Logs, pb.Logs)
	}

	pa.Kill()
	killed := time.Now()
	if !polltest.Until(t.Context(), 60*time.Second, func() bool { return len(engineStatus(pb).Partitions) == 4 }) {
		t.Fatalf("engine b did not take the 4 partitions over within 60s:\n%s", pb.Logs)
	}
	took := time.Since(killed)
	t.Logf("engine b owns every partition %s after engine a was killed", took.Round(10*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("takeover took %s, want at most 10s with the default timeouts", took)
	}

	// Engine b processes the events of every partition.
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{
			Key:     fmt.Appendf(nil, "k%d", i),
			Value:   fmt.Appendf(nil, `{"type": "squall_bench", "created_ms": 1700000000000, "payload": {"n": %d}}`, i),
			Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: fmt.Appendf(nil, "019a0000-0000-7000-8000-%012d", i)}},
		})
	}
	produce(t, addr, recs...)
	lines := func() int {
		b, _ := os.ReadFile(filepath.Join(archive, "one.log"))
		return strings.Count(string(b), "\n")
	}
	if !polltest.Until(t.Context(), 30*time.Second, func() bool { return lines() == 40 }) {
		t.Fatalf("archive has %d lines, want 40:\n%s", lines(), pb.Logs)
	}
}

// TestEngineCrashRepeats SIGKILLs engine processes at three points of a
// backlog drain (as soon as the first event is archived, then past a
// quarter and past half of the backlog), each time starting the next
// engine on the same archive directory. The events a killed engine ran
// and had not committed run again; the archive writes none of them twice
// and counts them (squall_action_archive_repeats_total of the next
// engine): never more than 2 × workers × queue size + 256 per kill, and
// every event is archived exactly once.
func TestEngineCrashRepeats(t *testing.T) {
	t.Parallel()
	w := newEngineWorld(t, 4)
	addr, archive := w.addr, w.archive

	const events = 60_000
	for start := 0; start < events; start += 5000 {
		var recs []*kgo.Record
		for i := start; i < start+5000; i++ {
			recs = append(recs, &kgo.Record{
				Key:     fmt.Appendf(nil, "k%d", i%64),
				Value:   fmt.Appendf(nil, `{"type": "squall_bench", "created_ms": 1700000000000, "payload": {"n": %d}}`, i),
				Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: fmt.Appendf(nil, "019a0000-0000-7000-8000-%012d", i)}},
			})
		}
		produce(t, addr, recs...)
	}

	const workers, queue = 4, 256
	bound := uint64(2*workers*queue + 256)
	archived := func() []byte {
		b, _ := os.ReadFile(filepath.Join(archive, "one.log"))
		return b
	}
	start := func() *proctest.Proc {
		return w.startEngine(t, "crash-test", "--workers", fmt.Sprint(workers), "--queue-size", fmt.Sprint(queue))
	}
	// wholeLines returns the archive's whole lines and how many it holds
	// that a kill cut short (the archive ends such a line with a newline
	// before it writes again: docs/actions.md, archive).
	wholeLines := func() (whole []string, torn int) {
		for line := range strings.Lines(string(archived())) {
			if json.Valid([]byte(line)) && strings.HasSuffix(line, "\n") {
				whole = append(whole, line)
			} else {
				torn++
			}
		}
		return whole, torn
	}
	// waitLines polls the archive (a separate process gives no signal).
	waitLines := func(n int, p *proctest.Proc) {
		t.Helper()
		// Counting newlines keeps each poll short, so that the engine is
		// killed near n; a line a kill cut short counts, at most one per kill.
		lines := func() int { return bytes.Count(archived(), []byte{'\n'}) }
		if !polltest.Until(t.Context(), 90*time.Second, func() bool { return lines() >= n }) {
			t.Fatalf("the archive has %d lines, want %d:\n%s", lines(), n, p.Logs)
		}
	}
	repeatsOf := func(p *proctest.Proc) uint64 {
		t.Helper()
		_, body := apitest.Call(t.Context(), http.MethodGet, p.Base+"/metrics", "", nil, "")
		return metricValue(t, string(body), "squall_action_archive_repeats_total")
	}

	var p *proctest.Proc
	for i, at := range []int{1, events / 4, events / 2} {
		np := start()
		waitLines(at, np)
		if p != nil {
			// The next engine ran the killed one's uncommitted events
			// first (they head their partitions): its count is final.
			r := repeatsOf(np)
			t.Logf("kill %d: %d events run again (bound %d)", i, r, bound)
			if r > bound {
				t.Errorf("kill %d: %d events run again, want at most %d", i, r, bound)
			}
		}
		np.Kill()
		whole, torn := wholeLines()
		t.Logf("kill %d: engine SIGKILLed with %d events archived (%d lines cut short)", i+1, len(whole), torn)
		p = np
	}
	last := start()
	waitLines(events, last)
	if !polltest.Until(t.Context(), 90*time.Second, func() bool { whole, _ := wholeLines(); return len(whole) >= events }) {
		whole, torn := wholeLines()
		t.Fatalf("the archive has %d whole lines (%d cut short), want %d:\n%s", len(whole), torn, events, last.Logs)
	}
	r := repeatsOf(last)
	t.Logf("kill 3: %d events run again (bound %d)", r, bound)
	if r > bound {
		t.Errorf("kill 3: %d events run again, want at most %d", r, bound)
	}
	keys := map[string]int{}
	first := map[string]int{}
	var dups []string // the first few lines written twice
	n := 0
	whole, torn := wholeLines()
	if torn > 3 {
		t.Errorf("%d lines cut short, want at most one per kill (3)", torn)
	}
	for _, line := range whole {
		k, _, _ := strings.Cut(strings.TrimPrefix(line, `{"squall_idempotency_key":"`), `"`)
		keys[k]++
		if f, ok := first[k]; !ok {
			first[k] = n
		} else if len(dups) < 5 {
			dups = append(dups, fmt.Sprintf("line %d repeats line %d (%d lines back)", n, f, n-f))
		}
		n++
	}
	if len(keys) != events || n != events {
		t.Errorf("%d lines with %d keys, want each of the %d events once; %s", n, len(keys), events, strings.Join(dups, "; "))
	}
}
