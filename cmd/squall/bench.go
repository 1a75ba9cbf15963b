package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/internal/bench"
	"github.com/squallhq/squall/satellite/kafkasink"
)

// benchWarning is said by every bench command's help.
const benchWarning = `It is a load tool: point it only at systems you own or are allowed to load.`

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a deployment of your own under load",
		Example: `  squall bench webhook --url "http://127.0.0.1:8081/webhook/hook?token=$TOKEN" --duration 30s
  squall bench findings --url http://127.0.0.1:8080 --token-file findings.token --json
  squall bench engine --kafka-brokers 127.0.0.1:9093 --events 100000 --metrics http://127.0.0.1:8082/metrics`,
		Long: `Bench sends load to a Squall deployment and measures what comes back.

` + benchWarning + `
Every run is bounded by --duration (and --requests when given).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchWebhookCommand(), newBenchFindingsCommand(), newBenchEngineCommand())
	return cmd
}

func newBenchWebhookCommand() *cobra.Command {
	var (
		cfg      bench.Config
		bodyFile string
		headers  []string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "webhook --url URL [--connections N] [--duration D] [--rate N] [--requests N] [--body-file F] [--header K:V ...] [--json]",
		Short: "Send webhook calls to an intake and report throughput, latency and errors",
		Example: `  squall bench webhook --url "http://127.0.0.1:8081/webhook/hook?token=$TOKEN" --duration 30s
  squall bench webhook --url "https://sat.example.com/webhook/hook?token=$TOKEN" --rate 2000 --connections 128 --json`,
		Long: `Webhook sends POST requests to a webhook URL, such as
  http://satellite:8081/engine/webhook/event/ID?token=TOKEN
over --connections keep-alive connections, each with one request in flight,
and reports the answers per second, the latency (min, mean, p50, p90, p99,
p99.9, max), the answers by HTTP status and the requests without an answer by
kind (connect_refused, connect, timeout, reset, closed, other, interrupted).

` + benchWarning + `
The run stops after --duration, or once --requests are sent if that comes
first; each request waits at most --timeout. Ctrl-C stops it early and still
prints the summary.

Without --rate each connection sends its next request as soon as the answer
came (closed loop). With --rate the requests are due at a fixed rate over all
connections (open loop) and latencies are measured from the time each request
was due, so that a target that stalls is charged for the wait; requests due
that no free connection could send in time are reported as missed.

A progress line goes to standard error every second; the summary goes to
standard output, as a table or, with --json, as one JSON object whose fields
docs/BENCHMARKS.md describes. The URL's query values (the webhook token) are
replaced by REDACTED in all output.

The exit code is 0 once the target answered, whatever the statuses; it is 1
when the flags are wrong, when no connection to the target could be opened
(nothing is sent then), or when no request got an answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, h := range headers {
				name, value, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("--header %q: want NAME:VALUE", h)
				}
				cfg.Headers = append(cfg.Headers, bench.Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
			}
			if bodyFile != "" {
				b, err := readBodyFile(bodyFile)
				if err != nil {
					return err
				}
				cfg.Body = b
			}
			cfg.Progress = cmd.ErrOrStderr()
			l, err := bench.New(cfg)
			if err != nil {
				return err
			}
			r, err := l.Run(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				err = printJSON(cmd.OutOrStdout(), r)
			} else {
				err = r.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if r.Answered == 0 {
				return fmt.Errorf("no request to %s got an answer", r.URL)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "webhook `URL`, http or https, with its token (required)")
	f.IntVar(&cfg.Connections, "connections", 64, fmt.Sprintf("keep-alive connections, each with one request in flight (1 to %d)", bench.MaxConnections))
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to send requests; always applies")
	f.Int64Var(&cfg.Requests, "requests", 0, "stop after this many requests (0: no limit but --duration)")
	f.Int64Var(&cfg.Rate, "rate", 0, "requests per second over all connections, open loop (0: each connection sends as soon as it is answered)")
	f.StringVar(&bodyFile, "body-file", "", fmt.Sprintf("`file` holding the request body, at most %d MiB (default: a small JSON event)", bench.MaxBodyBytes>>20))
	f.StringArrayVar(&headers, "header", nil, "request header `NAME:VALUE`, repeatable (Content-Type defaults to application/json)")
	f.StringVar(&cfg.Method, "method", "POST", "request method")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "longest wait for a connection or an answer")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

// readBodyFile reads a request body, refusing files larger than
// bench.MaxBodyBytes before reading them whole.
func readBodyFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--body-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, bench.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--body-file %s: %w", name, err)
	}
	if len(b) > bench.MaxBodyBytes {
		return nil, fmt.Errorf("--body-file %s: larger than %d MiB", name, bench.MaxBodyBytes>>20)
	}
	return b, nil
}

func newBenchFindingsCommand() *cobra.Command {
	var (
		cfg       bench.FindingsConfig
		tokenFile string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "findings --url URL --token-file F [--connections N] [--readers N] [--duration D] [--rate N] [--requests N] [--json]",
		Short: "Insert credential findings and list pages of them on a master, and report both",
		Example: `  squall bench findings --url http://127.0.0.1:8080 --token-file findings.token
  squall bench findings --url http://127.0.0.1:8080 --token-file findings.token --readers 0 --rate 500 --json`,
		Long: `Findings inserts credential findings into a master's findings API
(PUT /intel/api/sdk/v0/findings/credentials) over --connections keep-alive
connections and, at the same time, lists pages of them
(GET /intel/api/sdk/v0/findings/credential?limit=--page-size&page=1..--pages)
over --readers connections. It reports, for each, what squall bench webhook
reports (docs/BENCHMARKS.md).

` + benchWarning + `
The findings it inserts stay: each is new (201), with the user name
squall-bench-RUN-N@bench.invalid and tool_code squall-bench, in the tenant
of the token in --token-file. Use a token of a tenant kept for benchmarks
(squall token --user bench --tenant bench ...), never a customer's.

The run stops after --duration, or once --requests findings are inserted if
that comes first; the readers stop with the inserts. --rate paces the
inserts (open loop, as in squall bench webhook); the readers read as fast as
they are answered. The exit code is 0 once an insert was answered, 1 when
the flags are wrong, when no connection to the master could be opened, or
when no insert got an answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := readTokenFile("token-file", tokenFile)
			if err != nil {
				return err
			}
			cfg.Token = tok
			cfg.Progress = cmd.ErrOrStderr()
			f, err := bench.NewFindings(cfg)
			if err != nil {
				return err
			}
			r, err := f.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = printJSON(out, r)
			} else {
				err = writeFindingsText(out, r)
			}
			if err != nil {
				return err
			}
			if r.Inserts.Answered == 0 {
				return fmt.Errorf("no insert into %s got an answer", r.Inserts.URL)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "the master's base `URL`, http or https (required)")
	f.StringVar(&tokenFile, "token-file", "", "`file` holding the bearer token; its tenant receives the findings (required)")
	f.IntVar(&cfg.Connections, "connections", 16, fmt.Sprintf("keep-alive connections inserting findings, each with one request in flight (1 to %d)", bench.MaxConnections))
	f.IntVar(&cfg.Readers, "readers", 4, "keep-alive connections listing pages (0: none)")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to send requests; always applies")
	f.Int64Var(&cfg.Requests, "requests", 0, "stop after this many inserts (0: no limit but --duration)")
	f.Int64Var(&cfg.Rate, "rate", 0, "inserts per second over all connections, open loop (0: each connection sends as soon as it is answered)")
	f.IntVar(&cfg.PageSize, "page-size", 100, fmt.Sprintf("findings per page listed (1 to %d)", bench.MaxPageSize))
	f.IntVar(&cfg.Pages, "pages", 10, "the readers cycle through pages 1 to this")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "longest wait for a connection or an answer")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("token-file")
	return cmd
}

// writeFindingsText writes the summaries of a findings run as tables.
func writeFindingsText(w io.Writer, r *bench.FindingsResult) error {
	if _, err := fmt.Fprintf(w, "run %s: user names squall-bench-%s-N@bench.invalid\n\ninserts\n", r.Run, r.Run); err != nil {
		return err
	}
	if err := r.Inserts.WriteText(w); err != nil {
		return err
	}
	if r.Pages == nil {
		return nil
	}
	if _, err := io.WriteString(w, "\npages\n"); err != nil {
		return err
	}
	return r.Pages.WriteText(w)
}

func newBenchEngineCommand() *cobra.Command {
	var (
		cfg              = bench.EngineConfig{Kafka: kafkasink.DefaultConfig()}
		brokers          []string
		bodyFile         string
		saslPasswordFile string
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "engine --kafka-brokers HOST:PORT --events N --metrics URL [--metrics URL ...] [--json]",
		Short: "Write events to the engines' topic and measure how fast the engines drain them",
		Example: `  squall bench engine --kafka-brokers 127.0.0.1:9093 --events 100000 --metrics http://127.0.0.1:8082/metrics
  squall bench engine --kafka-brokers kafka-1:9092 --events 1000000 --metrics http://engine-1:8082/metrics --metrics http://engine-2:8082/metrics --json`,
		Long: `Engine writes --events events to the engines' Kafka topic (acks=all, in
concurrent batches) and reads the engines' /metrics (--metrics, one URL per
engine, such as http://engine-1:8082/metrics) until they counted that many
(processed, failed or deduplicated), then reports the write rate, the drain
rate, the engines' CPU per event, their largest resident memory and lag.

` + benchWarning + `
The events are real: the engines evaluate them against the active tree and
run the actions of the rules they match. Use a deployment (or a tenant's
rules) made for benchmarks. Each event has a fresh squall-event-id and the
key bench-K (K < --keys); by default it is a small JSON event of type
squall_bench whose metadata.tenant_id is its key; --body-file gives the
value of every event instead.

To measure a backlog: write it first with --events N and no --metrics while
the engines are stopped, start them, then run --events 0 --expect N
--from-start --metrics URL (counting from the engines' start).

A progress line goes to standard error every second; the summary goes to
standard output, as a table or, with --json, as one JSON object whose fields
docs/BENCHMARKS.md describes. The run ends when the engines counted the
events or after --timeout (exit code 1 then, after the summary).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Kafka.Brokers = splitList(brokers)
			if err := readSASLPassword(&cfg.Kafka.SASL, saslPasswordFile); err != nil {
				return err
			}
			if bodyFile != "" {
				b, err := readBodyFile(bodyFile)
				if err != nil {
					return err
				}
				cfg.Body = b
			}
			cfg.Kafka.ClientID = "squall-bench"
			cfg.Progress = cmd.ErrOrStderr()
			e, err := bench.NewEngine(cfg)
			if err != nil {
				return err
			}
			r, err := e.Run(cmd.Context())
			if err != nil && r == nil {
				return err
			}
			var werr error
			if asJSON {
				werr = printJSON(cmd.OutOrStdout(), r)
			} else {
				werr = r.WriteText(cmd.OutOrStdout())
			}
			switch {
			case err != nil:
				return err
			case werr != nil:
				return werr
			case len(cfg.Metrics) > 0 && !r.Complete:
				return fmt.Errorf("the engines counted %d of %d events", r.Counted, r.Expected)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&brokers, "kafka-brokers", nil, "Kafka bootstrap brokers, host:port (repeatable or comma-separated; required to write events)")
	f.StringVar(&cfg.Kafka.Topic, "topic", cfg.Kafka.Topic, "Kafka topic the engines consume")
	f.Int64Var(&cfg.Events, "events", 100_000, "events to write (0: none, only measure)")
	f.Int64Var(&cfg.Expect, "expect", 0, "events the engines must count for the run to end (0: --events)")
	f.BoolVar(&cfg.FromStart, "from-start", false, "count from the engines' start instead of from their counters when the run starts")
	f.StringArrayVar(&cfg.Metrics, "metrics", nil, "an engine's metrics `URL`, such as http://engine-1:8082/metrics; repeatable (none: only write)")
	f.IntVar(&cfg.Keys, "keys", 64, "record keys (tenants) the events are spread over")
	f.StringVar(&bodyFile, "body-file", "", fmt.Sprintf("`file` holding the value of every event, at most %d MiB (default: a small JSON event each)", bench.MaxBodyBytes>>20))
	f.IntVar(&cfg.Producers, "producers", 4, "concurrent writes")
	f.IntVar(&cfg.Batch, "batch", 1000, "events per write")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "longest run, writing and draining")
	f.StringVar(&cfg.Kafka.Compression, "kafka-compression", cfg.Kafka.Compression, "none, gzip, snappy, lz4 or zstd")
	kafkaClientFlags(f, &cfg.Kafka.TLS, &cfg.Kafka.SASL, &saslPasswordFile)
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
