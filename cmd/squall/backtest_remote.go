package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/master/backtests"
)

// backtestPoll is how often the command reads a running backtest.
const backtestPoll = 500 * time.Millisecond

// remoteRequest turns the flags into a request to the masters.
func (o *backtestOptions) remoteRequest() (backtests.Request, error) {
	if len(o.brokers) > 0 || o.activeTree != "" || o.draft != "" {
		return backtests.Request{}, errors.New("backtest: with --master the masters run it: give --draft ID or --version N, not --kafka-brokers or tree files")
	}
	req := backtests.Request{Draft: o.draftID, Version: o.version, Sample: o.sample}
	if o.sample == 0 {
		req.Sample = -1 // none: the API's 0 means its default
	}
	if o.maxEvents != backtest.DefaultMaxEvents {
		req.MaxEvents = o.maxEvents
	}
	if o.rate != 0 {
		return req, errors.New("backtest: --rate is the engines' --backtest-rate with --master")
	}
	last, lastFor, err := parseLast(o.last)
	if err != nil {
		return req, err
	}
	switch {
	case o.draftID == "" && o.version == 0:
		return req, errors.New("backtest: give --draft ID or --version N: what to compare with the active tree")
	case o.last != "" && (o.since != "" || o.until != ""):
		return req, errors.New("backtest: give --last or --since, not both")
	case last > 0:
		req.Last = last
	case lastFor > 0:
		req.Duration = lastFor.String()
	case o.since == "":
		return req, errors.New("backtest: give the range: --last 1h (a duration up to now), --last N (records per partition) or --since T [--until T]")
	default:
		now := time.Now()
		since, err := parseWhen("--since", o.since, now)
		if err != nil {
			return req, err
		}
		req.From = since.Format(time.RFC3339Nano)
		if o.until != "" {
			until, err := parseWhen("--until", o.until, now)
			if err != nil {
				return req, err
			}
			req.To = until.Format(time.RFC3339Nano)
		}
	}
	return req, nil
}

// backtestClient builds the masters' client from the flags.
func (o *backtestOptions) backtestClient() (*backtests.Client, error) {
	cc, err := o.cluster.client()
	if err != nil {
		return nil, err
	}
	return backtests.NewClient(cc.masters, cc.token, cc.http)
}

// runRemoteBacktest asks the masters for a backtest, waits for it with a
// progress line on a terminal, and prints it.
func runRemoteBacktest(ctx context.Context, o backtestOptions, stdout, stderr io.Writer) error {
	req, err := o.remoteRequest()
	if err != nil {
		return badInput(err)
	}
	c, err := o.backtestClient()
	if err != nil {
		return badInput(err)
	}
	var progress func(backtests.Backtest)
	shown := false
	if !o.noProgress && isTerminal(stderr) {
		progress = func(b backtests.Backtest) {
			fmt.Fprintf(stderr, "\r%s", remoteProgressLine(b))
			shown = true
		}
	}
	bt, runErr := c.Run(ctx, req, backtestPoll, progress)
	if shown {
		fmt.Fprintln(stderr)
	}
	if bt.ID == "" {
		return runErr
	}
	if o.asJSON {
		if err := printJSON(stdout, bt); err != nil {
			return err
		}
		return runErr
	}
	printRemoteBacktest(stdout, bt)
	return runErr
}

// remoteProgressLine is the progress line of a backtest the masters run.
func remoteProgressLine(b backtests.Backtest) string {
	switch {
	case b.State == backtests.StatePending:
		return fmt.Sprintf("backtest %s: waiting for an engine   ", b.ID)
	case b.Progress == nil:
		return fmt.Sprintf("backtest %s: %s   ", b.ID, b.State)
	}
	p := b.Progress
	line := fmt.Sprintf("%s on %s", progressLine(backtest.Progress{Read: p.Read, Total: p.Total, Rate: p.Rate,
		Elapsed: time.Duration(p.ElapsedMS) * time.Millisecond}), b.Engine)
	if p.Held {
		line += " (held: the engine's live pipeline lags)"
	}
	return line
}

// printRemoteBacktest prints what was compared, the state, and the
// result's summary and differing rules.
func printRemoteBacktest(w io.Writer, b backtests.Backtest) {
	what := "draft " + b.Draft
	if b.Draft == "" {
		what = "version " + strconv.FormatUint(b.Version, 10)
	}
	active := "the active tree"
	if b.ActiveVersion != 0 {
		active += fmt.Sprintf(" (version %d)", b.ActiveVersion)
	}
	fmt.Fprintf(w, "backtest %s: %s against %s: %s", b.ID, what, active, b.State)
	if b.Engine != "" {
		fmt.Fprintf(w, " on engine %s", b.Engine)
	}
	fmt.Fprintln(w)
	if b.Error != "" {
		fmt.Fprintf(w, "error: %s\n", b.Error)
	}
	if b.ResultTrimmed != "" {
		fmt.Fprintf(w, "result trimmed: %s\n", b.ResultTrimmed)
	}
	if b.Result != nil {
		printBacktest(w, b.Result)
	}
}

// newBacktestListCommand and the others manage the backtests the masters
// keep.
func newBacktestListCommand(o *backtestOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list --master URL --token-file F",
		Short:   "List the backtests the masters keep, newest first",
		Example: "  squall backtest list --master http://127.0.0.1:8080 --token-file ops.token",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.backtestClient()
			if err != nil {
				return badInput(err)
			}
			list, err := c.List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(backtests.List{Backtests: list})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tWHAT\tCREATED\tBY\tEVENTS")
			for _, b := range list {
				what := "draft " + b.Draft
				if b.Draft == "" {
					what = "version " + strconv.FormatUint(b.Version, 10)
				}
				events := "-"
				if b.Progress != nil {
					events = fmt.Sprintf("%d/%d", b.Progress.Read, b.Progress.Total)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.State, what, time.UnixMilli(b.CreatedMS).UTC().Format(time.RFC3339), b.CreatedBy, events)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func newBacktestIDCommand(o *backtestOptions, name, short string, do func(context.Context, *backtests.Client, string, io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:     name + " ID --master URL --token-file F",
		Short:   short,
		Example: "  squall backtest " + name + " 3f9a0c1d2e4b5a69 --master http://127.0.0.1:8080 --token-file ops.token",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.backtestClient()
			if err != nil {
				return badInput(err)
			}
			return do(cmd.Context(), c, args[0], cmd.OutOrStdout())
		},
	}
}

// backtestSubcommands are show, list, cancel and delete.
func backtestSubcommands(o *backtestOptions) []*cobra.Command {
	return []*cobra.Command{
		newBacktestListCommand(o),
		newBacktestIDCommand(o, "show", "Print a backtest and its result as JSON", func(ctx context.Context, c *backtests.Client, id string, w io.Writer) error {
			b, err := c.Get(ctx, id)
			if err != nil {
				return err
			}
			return printJSON(w, b)
		}),
		newBacktestIDCommand(o, "cancel", "Cancel a backtest: its engine stops and posts what it counted", func(ctx context.Context, c *backtests.Client, id string, w io.Writer) error {
			b, err := c.Cancel(ctx, id)
			if err == nil {
				fmt.Fprintf(w, "backtest %s: %s\n", b.ID, map[bool]string{true: "cancelling", false: b.State}[b.CancelRequested])
			}
			return err
		}),
		newBacktestIDCommand(o, "delete", "Delete a backtest (a running one stops)", func(ctx context.Context, c *backtests.Client, id string, w io.Writer) error {
			if err := c.Delete(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(w, "backtest %s deleted\n", id)
			return nil
		}),
	}
}
