package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/kafkaclient"
	"github.com/squallhq/squall/internal/textlist"
)

// backtestOptions are the flags of squall backtest.
type backtestOptions struct {
	brokers           []string
	topic             string
	tls               kafkaclient.TLS
	sasl              kafkaclient.SASL
	saslPasswordFile  string
	activeTree, draft string
	last              string
	since, until      string
	// The masters' mode: --master, --token-file, --draft or --version.
	cluster            clusterFlags
	draftID            string
	version            uint64
	sample             int
	rate               float64
	maxEvents          int64
	asJSON, noProgress bool
}

func newBacktestCommand() *cobra.Command {
	var o backtestOptions
	cmd := &cobra.Command{
		Use:   "backtest (--master URL --token-file F (--draft ID | --version N) | --kafka-brokers HOST:PORT --tree-active A --tree-draft B) (--last N|DURATION | --since T [--until T]) [flags]",
		Short: "Run a draft tree and the active one over recorded events, and print where they differ",
		Long: `Backtest compares a draft (or a version of the tree) with the active tree over
recorded events, and prints where they differ.

With --master, the masters run it (POST /squall/v1/backtests): --draft ID (a
draft you own) or --version N against the active tree, over --last 1h (a
duration up to now), --last N (records per partition) or --since/--until
(--from/--to). An engine runs it outside its consumer group at its own
--backtest-rate and --backtest-cpu; the command waits with a progress line,
prints the differing rules (--json: the whole backtest and its result) and
cancels the backtest on Ctrl-C. The token (--token-file) needs edit on the
root. squall backtest list / show / cancel / delete manage the backtests the
masters keep.

Without --master, backtest runs here: it reads a range of the events topic
straight from Kafka, outside any consumer group (it commits nothing and moves no engine's offsets), evaluates
every event with both trees as a test event, runs no action, and prints the
rules whose match counts differ, with the number of events whose outcome
(matched rules or resolved actions) differs. --json prints the whole result:
the counts of every rule and ruleset under both trees and a sample of the
differing events with both outcomes (docs/operations.md, "Backtest").

The trees are files: export files ({"version": "1.1", "Filter": {...}}, as
squall export writes them) or Tornado rules folders. The range is the last N
records of each partition (--last), or the records whose timestamps fall
between --since and --until (RFC 3339 times, or durations before now; no
--until: up to the end of each partition when the backtest starts). At most
--max-events are read: a larger range keeps the latest records of each
partition, and the result says it was truncated. --rate bounds the events
evaluated per second; one backtest uses one core at most.

While it runs, a progress line goes to stderr when stderr is a terminal.
Ctrl-C stops it and prints what it counted so far (exit status 1).
Exit status 2: bad input (a flag, a tree), nothing read.`,
		Example: `  # The masters run it: your draft against the active tree, over the last hour
  squall backtest --master http://127.0.0.1:8080 --token-file ops.token --draft DRAFT_ID --last 1h

  # Version 12 against the active tree over a window of the past, as JSON
  squall backtest --master http://127.0.0.1:8080 --token-file ops.token --version 12 \
    --from 2026-11-28T09:00:00Z --to 2026-11-28T10:00:00Z --json

  # Here, from Kafka: the last 10,000 events of each partition
  squall backtest --kafka-brokers 127.0.0.1:9092 --tree-active active.json --tree-draft draft.json --last 10000

  # A master's draft against its active tree over the last hour, at most 2,000 events/s, as JSON
  squall export --master http://127.0.0.1:8080 --token-file ops.token -o active.json
  squall export --master http://127.0.0.1:8080 --token-file ops.token --draft DRAFT_ID -o draft.json
  squall backtest --kafka-brokers 127.0.0.1:9092 --tree-active active.json --tree-draft draft.json --since 1h --rate 2000 --json

  # A window of the past
  squall backtest --kafka-brokers 127.0.0.1:9092 --tree-active active.json --tree-draft draft.json \
    --since 2026-11-28T09:00:00Z --until 2026-11-28T10:00:00Z --sample 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.cluster.masters) > 0 {
				return runRemoteBacktest(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			bt, err := o.build(time.Now())
			if err != nil {
				return badInput(err)
			}
			return runBacktest(cmd.Context(), bt, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	f := cmd.Flags()
	f.StringSliceVar(&o.brokers, "kafka-brokers", nil, "Kafka bootstrap brokers, host:port (repeatable or comma-separated; required; --brokers is accepted too)")
	f.StringVar(&o.topic, "topic", "squall.events", "Kafka topic of the events")
	kafkaClientFlags(f, &o.tls, &o.sasl, &o.saslPasswordFile)
	f.StringVar(&o.activeTree, "tree-active", "", "export file or Tornado rules folder of the active tree (required)")
	f.StringVar(&o.draft, "tree-draft", "", "export file or Tornado rules folder of the tree to try (required)")
	f.StringVar(&o.last, "last", "", "read the last N records of each partition, or the records of the last DURATION (1h)")
	f.StringVar(&o.since, "since", "", "read the records since then: RFC 3339, or a duration before now (1h); --from is the same")
	f.StringVar(&o.until, "until", "", "with --since: read the records before then: RFC 3339, or a duration before now; --to is the same")
	o.cluster.define(cmd.PersistentFlags(), "edit")
	cmd.AddCommand(backtestSubcommands(&o)...)
	f.StringVar(&o.draftID, "draft", "", "with --master: the id of the draft to try (yours)")
	f.Uint64Var(&o.version, "version", 0, "with --master: the version of the tree to try")
	f.IntVar(&o.sample, "sample", backtest.DefaultSample, fmt.Sprintf("differing events kept with both outcomes (--json; at most %d)", backtest.MaxSample))
	f.Float64Var(&o.rate, "rate", 0, "events evaluated per second at most (0: as fast as one core goes)")
	f.Int64Var(&o.maxEvents, "max-events", backtest.DefaultMaxEvents, "events read at most; a larger range keeps the latest of each partition")
	f.BoolVar(&o.asJSON, "json", false, "print the whole result as JSON")
	f.BoolVar(&o.noProgress, "no-progress", false, "no progress line, even on a terminal")
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		switch name {
		case "brokers":
			name = "kafka-brokers"
		case "from":
			name = "since"
		case "to":
			name = "until"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

// build checks the flags, reads the trees and builds the backtest.
func (o *backtestOptions) build(now time.Time) (*backtest.Backtest, error) {
	if len(o.brokers) == 0 {
		return nil, errors.New("backtest: --kafka-brokers is required (or --master: the masters run it)")
	}
	if o.draftID != "" || o.version != 0 {
		return nil, errors.New("backtest: --draft and --version go with --master; here, give the trees' files: --tree-active and --tree-draft")
	}
	if o.activeTree == "" || o.draft == "" {
		return nil, errors.New("backtest: --tree-active and --tree-draft are required: the export files (or Tornado rules folders) of the two trees")
	}
	var r backtest.Range
	last, lastFor, err := parseLast(o.last)
	if err != nil {
		return nil, err
	}
	switch {
	case o.last != "" && (o.since != "" || o.until != ""):
		return nil, errors.New("backtest: give --last or --since, not both")
	case last > 0:
		r.Last = last
	case lastFor > 0:
		r.Since = now.Add(-lastFor)
	case o.since == "":
		return nil, errors.New("backtest: give the range: --last N (records per partition) or --since T")
	default:
		var err error
		if r.Since, err = parseWhen("--since", o.since, now); err != nil {
			return nil, err
		}
		if o.until != "" {
			if r.Until, err = parseWhen("--until", o.until, now); err != nil {
				return nil, err
			}
			if !r.Until.After(r.Since) {
				return nil, fmt.Errorf("backtest: --until %s is not after --since %s", o.until, o.since)
			}
		}
	}
	if o.sample < 0 || o.sample > backtest.MaxSample {
		return nil, fmt.Errorf("backtest: --sample %d: want 0 to %d", o.sample, backtest.MaxSample)
	}
	if o.rate < 0 {
		return nil, fmt.Errorf("backtest: --rate %g: want a positive rate, or 0 for none", o.rate)
	}
	if o.maxEvents <= 0 {
		return nil, fmt.Errorf("backtest: --max-events %d: want a positive number", o.maxEvents)
	}
	active, err := loadTree(o.activeTree)
	if err != nil {
		return nil, fmt.Errorf("--tree-active: %w", err)
	}
	draft, err := loadTree(o.draft)
	if err != nil {
		return nil, fmt.Errorf("--tree-draft: %w", err)
	}
	if err := readSASLPassword(&o.sasl, o.saslPasswordFile); err != nil {
		return nil, err
	}
	reader, err := kafkasource.NewReader(kafkasource.Dial{Brokers: o.brokers, ClientID: "squall-backtest", TLS: o.tls, SASL: o.sasl})
	if err != nil {
		return nil, err
	}
	sample := o.sample
	if sample == 0 {
		sample = -1 // none: the package's 0 means its default
	}
	bt, err := backtest.New(reader, backtest.Spec{Active: active, Candidate: draft, Topic: o.topic, Range: r,
		MaxEvents: o.maxEvents, Sample: sample, Rate: o.rate})
	if err != nil {
		return nil, err
	}
	return bt, nil
}

// parseLast reads --last: a number of records per partition, or a
// duration up to now (both zero when v is empty).
func parseLast(v string) (int64, time.Duration, error) {
	if v == "" {
		return 0, 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return n, 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return 0, d, nil
	}
	return 0, 0, fmt.Errorf("backtest: --last %q: want a positive number of records per partition, or a duration (1h)", v)
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("backtest: %s %q: want an RFC 3339 time or a duration before now (e.g. 1h)", flag, v)
}

// runBacktest runs bt with a progress line on stderr when it is a
// terminal, and prints the result.
func runBacktest(ctx context.Context, bt *backtest.Backtest, stdout, stderr io.Writer, o backtestOptions) error {
	var stopProgress func()
	if !o.noProgress && isTerminal(stderr) {
		stopProgress = showProgress(bt, stderr)
	}
	res, runErr := bt.Run(ctx)
	if stopProgress != nil {
		stopProgress()
	}
	if res == nil {
		return runErr
	}
	if o.asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printBacktest(stdout, res)
	}
	return runErr
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// showProgress rewrites a progress line on w twice a second until the
// returned function is called, which ends the line.
func showProgress(bt *backtest.Backtest, w io.Writer) func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintf(w, "\r%s\n", progressLine(bt.Progress()))
				return
			case <-tick.C:
				fmt.Fprintf(w, "\r%s", progressLine(bt.Progress()))
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// progressLine writes progress on one line of steady width.
func progressLine(p backtest.Progress) string {
	pct := ""
	if p.Total > 0 {
		pct = fmt.Sprintf(" (%3d%%)", p.Read*100/p.Total)
	}
	return fmt.Sprintf("backtest: %d of %d events%s, %.0f events/s, %s   ", p.Read, p.Total, pct, p.Rate, p.Elapsed.Round(time.Second))
}

// printBacktest prints the summary and the differing rules.
func printBacktest(w io.Writer, res *backtest.Result) {
	fmt.Fprintf(w, "%d events read of %s", res.Events, res.Topic)
	if res.Truncated {
		fmt.Fprintf(w, " (the range holds %d: cut to --max-events, the latest of each partition)", res.RangeEvents)
	}
	if !res.Complete {
		fmt.Fprint(w, " (stopped before the end of the range)")
	}
	fmt.Fprintf(w, " in %s, %.0f events/s\n", res.Elapsed.Round(time.Millisecond), res.Rate)
	if res.Undecodable > 0 {
		fmt.Fprintf(w, "%d records are not events (evaluated by neither tree)\n", res.Undecodable)
	}
	fmt.Fprintf(w, "%d events with a different outcome (matched rules or resolved actions)\n", res.DifferingEvents)
	if len(res.DifferingRules) == 0 {
		fmt.Fprintln(w, "no rule's match count differs")
		return
	}
	fmt.Fprintf(w, "\n%d rules whose match counts differ:\n", len(res.DifferingRules))
	differing := map[string]bool{}
	for _, r := range res.DifferingRules {
		differing[r] = true
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ACTIVE\tDRAFT\tCHANGE\t  RULE")
	for _, rc := range res.Rules {
		if !differing[rc.Rule] {
			continue
		}
		active, draft := fmt.Sprint(rc.Active), fmt.Sprint(rc.Candidate)
		switch rc.Only {
		case "active":
			draft = "-"
		case "candidate":
			active = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%+d\t  %s\n", active, draft, rc.Candidate-rc.Active, rc.Rule)
	}
	_ = tw.Flush()
	if len(res.Samples) > 0 {
		fmt.Fprintf(w, "\n%d differing events kept (--json prints them with both outcomes): %s\n", len(res.Samples), sampleRefs(res.Samples))
	}
}

// sampleRefs lists where the first samples are, partition/offset.
func sampleRefs(samples []backtest.Sample) string {
	return textlist.Join(samples, 5, ", ", func(s backtest.Sample) string { return fmt.Sprintf("%d/%d", s.Partition, s.Offset) })
}
