package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/backtests"
)

// backtestTree is a tree whose rule big matches orders over THRESHOLD and
// whose rule RULE matches every alert.
const backtestTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "orders", "rules": [
    {"name": "big", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "AND", "operators": [
       {"type": "equals", "first": "${event.type}", "second": "order"},
       {"type": "gt", "first": "${event.payload.amount}", "second": THRESHOLD}]}, "WITH": {}},
     "actions": [{"id": "logger", "payload": {"amount": "${event.payload.amount}"}}]},
    {"name": "RULE", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "alert"}, "WITH": {}},
     "actions": []}]}}]}}`

// TestBacktestCommand runs squall backtest against a broker: the counts
// of the differing rules, computed here from the events sent, in the text
// and JSON forms, and the refusals of bad input.
func TestBacktestCommand(t *testing.T) {
	t.Parallel()
	const topic = "squall.events"
	addr := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 2}).Addr
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{addr}}, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var over100, over50, alerts int64
	var recs []kafkasource.Record
	for i := range n {
		typ, amount := "order", (i*37)%200
		if i%4 == 3 {
			typ = "alert"
			alerts++
		} else {
			if amount > 100 {
				over100++
			}
			if amount > 50 {
				over50++
			}
		}
		recs = append(recs, kafkasource.Record{Value: fmt.Appendf(nil, `{"type":%q,"created_ms":1,"payload":{"amount":%d}}`, typ, amount),
			ToPartition: true, Partition: i % 2})
	}
	if err := w.Write(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tree := func(name, threshold, rule string) string {
		return filetest.Write(t, dir, name, strings.NewReplacer("THRESHOLD", threshold, "RULE", rule).Replace(backtestTree))
	}
	active, draft := tree("active.json", "100", "alerts"), tree("draft.json", "50", "alerts_renamed")
	base := []string{"backtest", "--brokers", addr, "--tree-active", active, "--tree-draft", draft}

	t.Run("text", func(t *testing.T) {
		code, stdout, stderr := runSquall(t, "", append(base, "--last", "1000")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("%d events read of squall.events", n),
			fmt.Sprintf("%d events with a different outcome", over50-over100+alerts),
			"3 rules whose match counts differ",
			fmt.Sprintf("%d %d %+d root/orders/big\n", over100, over50, over50-over100),
			fmt.Sprintf("%d - %+d root/orders/alerts\n", alerts, -alerts),
			fmt.Sprintf("- %d %+d root/orders/alerts_renamed\n", alerts, alerts),
		} {
			if !strings.Contains(squeezeSpaces(stdout), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if stderr != "" {
			t.Errorf("stderr (not a terminal) %q", stderr)
		}
	})
	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runSquall(t, "", append(base, "--since", "1h", "--sample", "3", "--rate", "100000", "--json")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var res backtest.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v:\n%s", err, stdout)
		}
		counts := map[string][2]int64{}
		for _, rc := range res.Rules {
			counts[rc.Rule] = [2]int64{rc.Active, rc.Candidate}
		}
		if want := (map[string][2]int64{"root/orders/big": {over100, over50}, "root/orders/alerts": {alerts, 0}, "root/orders/alerts_renamed": {0, alerts}}); fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("counts %v, want %v", counts, want)
		}
		if !res.Complete || res.Events != n || len(res.Samples) != 3 || res.Samples[0].Active.Matched == nil {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		// Ctrl-C: what was counted is printed, with exit status 1.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, append(base, "--last", "1000"), strings.NewReader(""), &out, &errOut)
		if code != 1 || !strings.Contains(out.String(), "(stopped before the end of the range)") || !strings.Contains(errOut.String(), "context canceled") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			err  string
		}{
			{"no brokers", []string{"backtest", "--tree-active", active, "--tree-draft", draft, "--last", "1"}, "--kafka-brokers is required"},
			{"no draft", []string{"backtest", "--brokers", addr, "--tree-active", active, "--last", "1"}, "--tree-draft are required"},
			{"no range", base, "give the range"},
			{"last and since", append(base, "--last", "1", "--since", "1h"), "not both"},
			{"bad since", append(base, "--since", "yesterday"), `--since "yesterday"`},
			{"until before since", append(base, "--since", "1h", "--until", "2h"), "is not after --since"},
			{"sample too large", append(base, "--last", "1", "--sample", "5000"), "--sample 5000"},
			{"missing tree", []string{"backtest", "--brokers", addr, "--tree-active", filepath.Join(dir, "none.json"), "--tree-draft", draft, "--last", "1"}, "--tree-active: tree:"},
			{"unknown flag", append(base, "--lsat", "1"), "unknown flag: --lsat"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, stdout, stderr := runSquall(t, "", tc.args...)
				if code != 2 || stdout != "" || !strings.Contains(stderr, tc.err) {
					t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.err)
				}
			})
		}
	})
}

// squeezeSpaces turns the runs of spaces of each line into one, and
// trims the lines.
func squeezeSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	got := progressLine(backtest.Progress{Read: 250, Total: 1000, Elapsed: 2 * time.Second, Rate: 125})
	if want := "backtest: 250 of 1000 events ( 25%), 125 events/s, 2s   "; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestShowProgress: the progress line ends with the final count when the
// backtest is done.
func TestShowProgress(t *testing.T) {
	t.Parallel()
	bt, err := backtest.New(nil, backtest.Spec{Active: config.NewRoot(), Candidate: config.NewRoot(), Topic: "t", Range: backtest.Range{Last: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	stop := showProgress(bt, &buf)
	stop()
	if got := buf.String(); !strings.HasPrefix(got, "\rbacktest: 0 of 0 events, 0 events/s") || !strings.HasSuffix(got, "\n") {
		t.Errorf("%q", got)
	}
}

// TestBacktestCommand_masterInput: with --master, bad flags are refused
// before any request (exit 2), and so is mixing the two modes.
func TestBacktestCommand_masterInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing listens there: a request would fail with exit 1.
	m := []string{"backtest", "--master", "http://127.0.0.1:1", "--token-file", tokenFile}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"nothing to compare", append(m, "--last", "1h"), "give --draft ID or --version N"},
		{"no range", append(m, "--draft", "d1"), "give the range"},
		{"bad last", append(m, "--draft", "d1", "--last", "an hour"), `--last "an hour"`},
		{"last and from", append(m, "--draft", "d1", "--last", "1h", "--from", "2h"), "not both"},
		{"bad from", append(m, "--draft", "d1", "--from", "yesterday"), `--since "yesterday"`},
		{"brokers too", append(m, "--draft", "d1", "--last", "1h", "--kafka-brokers", "k:9092"), "the masters run it"},
		{"rate", append(m, "--draft", "d1", "--last", "1h", "--rate", "10"), "--backtest-rate"},
		{"no token file", []string{"backtest", "--master", "http://127.0.0.1:1", "--draft", "d1", "--last", "1h"}, "--token-file"},
		{"draft without master", []string{"backtest", "--kafka-brokers", "k:9092", "--tree-active", "a", "--tree-draft", "b", "--draft", "d1", "--last", "1"}, "go with --master"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runSquall(t, "", tc.args...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.err) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.err)
			}
		})
	}
}

func TestRemoteProgressLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    backtests.Backtest
		want string
	}{
		{backtests.Backtest{ID: "b1", State: backtests.StatePending}, "backtest b1: waiting for an engine"},
		{backtests.Backtest{ID: "b1", State: backtests.StateRunning, Engine: "e1", Progress: &backtests.Progress{Read: 50, Total: 200, Rate: 10, ElapsedMS: 5000}},
			"backtest: 50 of 200 events ( 25%), 10 events/s, 5s    on e1"},
		{backtests.Backtest{ID: "b1", State: backtests.StateRunning, Engine: "e1", Progress: &backtests.Progress{Read: 50, Total: 200, Held: true}},
			"(held: the engine's live pipeline lags)"},
	} {
		if got := remoteProgressLine(tc.b); !strings.Contains(got, tc.want) {
			t.Errorf("%q, want %q in it", got, tc.want)
		}
	}
}
