package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/master/deadletters"
)

// deadLetterClient holds the flags every squall deadletters command has.
type deadLetterClient struct {
	masterURL, tokenFile string
}

func (o *deadLetterClient) client() (*apiClient, error) {
	if o.masterURL == "" {
		return nil, fmt.Errorf("--master (a master's base URL) is required")
	}
	if o.tokenFile == "" {
		return nil, fmt.Errorf("--token-file is required")
	}
	return newAPIClient(o.masterURL, o.tokenFile)
}

func newDeadLettersCommand() *cobra.Command {
	var o deadLetterClient
	cmd := &cobra.Command{
		Use:   "deadletters list | show ID | replay ID... [flags]",
		Short: "List, show and replay the events the engines dead-lettered",
		Long: `Deadletters reads the dead-letter topic through a master's dead-letter API
(/squall/v1/deadletters, served by masters started with --kafka-brokers): the
events the engines could not finish, each with why (stage, error, failed
actions and their rules, engine, time) and where it came from. Replay sends
dead letters back to the events topic once the cause is fixed; a dead letter
is replayed once however often it is asked, and an event replayed
--deadletters-max-replays times (a master flag) stays dead.

IDs are topic/partition/offset in the dead-letter topic, as list prints them.
The token (--token-file) needs deadletters_read on the root to list and show,
deadletters_replay to replay (admin has both). See docs/operations.md, "Dead
letters".`,
		Example: `  squall deadletters list --master http://127.0.0.1:8080 --token-file ops.token --since 1h
  squall deadletters show squall.events.dlq/0/42 --master http://127.0.0.1:8080 --token-file ops.token
  squall deadletters replay squall.events.dlq/0/42 squall.events.dlq/1/7 --master http://127.0.0.1:8080 --token-file ops.token
  squall deadletters replay --reason "action http" --since 2h --master http://127.0.0.1:8080 --token-file ops.token`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.masterURL, "master", "", "base URL of a master (e.g. http://127.0.0.1:8080)")
	pf.StringVar(&o.tokenFile, "token-file", "", "file holding the API token (deadletters_read, or deadletters_replay to replay, on the root)")
	cmd.AddCommand(newDeadLettersListCommand(&o), newDeadLettersShowCommand(&o), newDeadLettersReplayCommand(&o))
	return cmd
}

// filterFlags defines the flags of a filter.
func filterFlags(cmd *cobra.Command, f *deadletters.Filter) {
	fl := cmd.Flags()
	fl.StringVar(&f.Stage, "stage", "", "only this stage: decode, evaluate or action")
	fl.StringVar(&f.Reason, "reason", "", `only this reason, as list groups them (e.g. "action http")`)
	fl.StringVar(&f.Error, "error", "", "only errors holding this text (case-insensitive)")
	fl.StringVar(&f.Webhook, "webhook", "", "only events of this webhook")
	fl.StringVar(&f.Since, "since", "", "only dead letters since then: RFC 3339, or a duration before now (1h)")
	fl.StringVar(&f.Until, "until", "", "only dead letters until then: RFC 3339, or a duration before now")
}

func newDeadLettersListCommand(o *deadLetterClient) *cobra.Command {
	var f deadletters.Filter
	var limit int
	var cursor string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--stage S] [--reason R] [--error TEXT] [--webhook W] [--since T] [--until T] [--limit N] [--cursor C] [--json]",
		Short: "List dead letters, and their reasons counted",
		Long: `List prints a page of dead letters (oldest first) and the reasons of those the
master read, counted. A master reads a bounded number of records per request:
when the page says so, continue with --cursor.`,
		Example: `  squall deadletters list --master http://127.0.0.1:8080 --token-file ops.token --stage action --since 1h
  squall deadletters list --master http://127.0.0.1:8080 --token-file ops.token --json | jq '.reasons'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := filterQuery(f)
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			path := deadletters.Prefix
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var raw json.RawMessage
			if err := c.do(http.MethodGet, path, "", nil, &raw); err != nil {
				return fmt.Errorf("deadletters list: %w", err)
			}
			if asJSON {
				return writeIndented(cmd.OutOrStdout(), raw)
			}
			var p deadletters.Page
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("deadletters list: %w", err)
			}
			printPage(cmd.OutOrStdout(), &p)
			return nil
		},
	}
	filterFlags(cmd, &f)
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("dead letters per page (default %d, at most %d)", deadletters.DefaultPageSize, deadletters.MaxPageSize))
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue where the previous page ended (its next cursor)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON answer")
	return cmd
}

// filterQuery is the query string of a filter.
func filterQuery(f deadletters.Filter) url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"stage", f.Stage}, {"reason", f.Reason}, {"error", f.Error}, {"webhook", f.Webhook}, {"since", f.Since}, {"until", f.Until}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

// printPage prints a page as a table, then the reasons.
func printPage(w io.Writer, p *deadletters.Page) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDEAD AT\tREASON\tREPLAYS\tWEBHOOK\tERROR")
	for _, l := range p.DeadLetters {
		replays := fmt.Sprint(l.ReplayCount)
		if l.Replayed != nil {
			replays += " (replayed)"
		}
		errText := l.Error
		if len(errText) > 80 {
			errText = errText[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.DeadAt.UTC().Format(time.RFC3339), l.Reason, replays, l.Webhook, errText)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d matching of %d records read", p.Matched, p.Scanned)
	if !p.Complete {
		fmt.Fprint(w, " (a scan limit stopped the read)")
	}
	fmt.Fprintln(w)
	for _, rc := range p.Reasons {
		fmt.Fprintf(w, "  %6d  %s  (e.g. %s)\n", rc.Count, rc.Reason, rc.Example)
	}
	if p.Next != "" {
		fmt.Fprintf(w, "next page: --cursor %s\n", p.Next)
	}
}

func writeIndented(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func newDeadLettersShowCommand(o *deadLetterClient) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Print one dead letter as JSON: its reason, headers and event",
		Example: `  squall deadletters show squall.events.dlq/0/42 --master http://127.0.0.1:8080 --token-file ops.token
  squall deadletters show squall.events.dlq/0/42 --master http://127.0.0.1:8080 --token-file ops.token | jq .event`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.do(http.MethodGet, deadletters.Prefix+"/"+args[0], "", nil, &raw); err != nil {
				return fmt.Errorf("deadletters show: %w", err)
			}
			return writeIndented(cmd.OutOrStdout(), raw)
		},
	}
}

func newDeadLettersReplayCommand(o *deadLetterClient) *cobra.Command {
	var f deadletters.Filter
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay (ID... | --stage S --reason R --error TEXT --webhook W --since T --until T [--limit N]) [--json]",
		Short: "Send dead letters back to the events topic",
		Long: `Replay produces the dead letters named by their ids, or those the filter flags
select (at most --limit), back to the events topic. Each line says what
became of one: replayed, already_replayed (a dead letter is replayed once),
refused (replayed too often: it stays dead; or too far back to check) or
not_found. It fails when one was refused, not found or failed.`,
		Example: `  squall deadletters replay squall.events.dlq/0/42 --master http://127.0.0.1:8080 --token-file ops.token
  squall deadletters replay --reason "action http" --since 1h --limit 100 --master http://127.0.0.1:8080 --token-file ops.token`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := deadletters.ReplayRequest{IDs: args, Limit: limit}
			if f != (deadletters.Filter{}) {
				if len(args) > 0 {
					return fmt.Errorf("give ids or filter flags, not both")
				}
				req.Filter = &f
			} else if len(args) == 0 {
				return fmt.Errorf("give the ids to replay, or filter flags (--stage, --reason, --error, --webhook, --since, --until)")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			body, _ := json.Marshal(req)
			var raw json.RawMessage
			if err := c.do(http.MethodPost, deadletters.Prefix+"/replay", "application/json", bytes.NewReader(body), &raw); err != nil {
				return fmt.Errorf("deadletters replay: %w", err)
			}
			var ans deadletters.ReplayAnswer
			if err := json.Unmarshal(raw, &ans); err != nil {
				return fmt.Errorf("deadletters replay: %w", err)
			}
			if asJSON {
				if err := writeIndented(cmd.OutOrStdout(), raw); err != nil {
					return err
				}
			}
			bad := 0
			for _, r := range ans.Results {
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", r.ID, r.Status, r.Reason)
				}
				if r.Status != deadletters.StatusReplayed && r.Status != deadletters.StatusAlreadyReplayed {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("deadletters replay: %d of %d not replayed", bad, len(ans.Results))
			}
			return nil
		},
	}
	filterFlags(cmd, &f)
	cmd.Flags().IntVar(&limit, "limit", 0, "with filter flags: replay at most this many (default and most: the master's batch limit)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON answer")
	return cmd
}
