package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

func newProcessCommand() *cobra.Command {
	var treeFile, eventFile, processType string
	var explain bool
	cmd := &cobra.Command{
		Use:   "process --tree TREE.json --event EVENT.json",
		Short: "Run one event through a processing tree and print the result",
		Example: `  squall process --tree tree.json --event event.json
  echo '{"event": {"type": "disk", "payload": {}}}' | squall process --tree tree.json --event -`,
		Long: `Process evaluates one event against a processing tree, without any server, and
prints what the test-event API answers: {"event": ..., "result": ...}.

TREE.json is an export file ({"version": "1.1", "Filter": {...}}); its top node
is the root of the tree. EVENT.json is an event ({"type", "created_ms",
"payload", "metadata"}) or a test-event request ({"event": ..., "process_type":
...}); "-" reads it from standard input.

With --process-type Full, the actions of matched rules are executed: here only
the logger action exists, which logs the action on standard error; other
actions are reported as not executed.

With --explain (or "explain": true in the request), the answer also holds
"explain": every filter, iterator and rule the event reached, with each
condition as evaluated (the values its accessors resolved to), each WITH
extraction (its input, whether the regex matched, what it extracted) and why
each filter and iterator passed or stopped (docs/rules.md).

An invalid tree or event exits with status 1 and a message naming the problem;
nothing is printed on standard output then.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pt *tree.ProcessType
			if cmd.Flags().Changed("process-type") {
				p := tree.ProcessType(processType)
				if err := p.Validate(); err != nil {
					return err
				}
				pt = &p
			}
			return processFiles(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), treeFile, eventFile, pt, explain)
		},
	}
	cmd.Flags().StringVar(&treeFile, "tree", "", "export file of the processing tree (required)")
	cmd.Flags().StringVar(&eventFile, "event", "", `event or test-event request file, "-" for standard input (required)`)
	cmd.Flags().StringVar(&processType, "process-type", string(tree.SkipActions), "SkipActions or Full; overrides the request's process_type")
	cmd.Flags().BoolVar(&explain, "explain", false, "explain why each filter, iterator and rule came out as it did")
	_ = cmd.MarkFlagRequired("tree")
	_ = cmd.MarkFlagRequired("event")
	return cmd
}

// processFiles reads the tree and the event, evaluates, and writes the
// response. pt, when set, overrides the request's process type; explain
// adds the explanation (as the request's explain does).
func processFiles(stdin io.Reader, stdout, stderr io.Writer, treeFile, eventFile string, pt *tree.ProcessType, explain bool) error {
	data, err := os.ReadFile(treeFile)
	if err != nil {
		return fmt.Errorf("read tree: %w", err)
	}
	ex, err := config.DecodeExport(data)
	if err != nil {
		return fmt.Errorf("tree %s: %w", treeFile, err)
	}
	tr, err := tree.Compile(ex.Node)
	if err != nil {
		return fmt.Errorf("tree %s: %w", treeFile, err)
	}
	var evData []byte
	if eventFile == "-" {
		evData, err = io.ReadAll(io.LimitReader(stdin, maxEventFile+1))
	} else {
		evData, err = readLimited(eventFile)
	}
	if err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	if len(evData) > maxEventFile {
		return fmt.Errorf("event %s: larger than %d bytes", eventFile, maxEventFile)
	}
	req, err := decodeEventOrRequest(evData)
	if err != nil {
		return fmt.Errorf("event %s: %w", eventFile, err)
	}
	if pt != nil {
		req.ProcessType = *pt
	}
	result, actions := tr.Process(req.Event)
	resp := tree.Response{Event: req.Sent, Result: result}
	if explain || req.Explain {
		resp.Explain = tr.Explain(req.Event, tree.DefaultExplainLimits())
	}
	out, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if req.ProcessType == tree.Full {
		logActions(slog.New(slog.NewJSONHandler(stderr, nil)), actions)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// maxEventFile bounds the event file read.
const maxEventFile = 64 << 20

func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxEventFile+1))
}

// decodeEventOrRequest accepts an event or a test-event request: a JSON
// object with an "event" field is a request.
func decodeEventOrRequest(data []byte) (*tree.Request, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err == nil {
		if _, ok := probe["event"]; ok {
			return tree.DecodeRequest(data)
		}
	}
	sent := bytes.TrimSpace(data)
	ev, err := tree.DecodeEvent(sent)
	if err != nil {
		return nil, err
	}
	return &tree.Request{Event: ev, Sent: sent, ProcessType: tree.SkipActions}, nil
}

// logActions is the logger executor: it logs every action; actions of
// other kinds have no executor in this command.
func logActions(logger *slog.Logger, actions []tree.Action) {
	for _, a := range actions {
		if a.ID != "logger" {
			logger.Warn("action not executed: squall process only executes logger actions", "action", a.ID)
			continue
		}
		logger.Info("action", "action", a.ID, "payload", a.Payload, "created_ms", a.CreatedMs)
	}
}
