// Command squall is Squall's one binary: the master, satellite and engine
// roles, and the tools around them (dev, process, token, bench, ...).
//
// Run "squall --help" for the list of commands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "squall: %v\n", err)
		var ce *exitCodeError
		if errors.As(err, &ce) {
			return ce.code
		}
		return 1
	}
	return 0
}

// exitCodeError is an error that ends the process with its own exit code
// instead of 1 (squall status: 2 for an unhealthy cluster).
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "squall",
		Short: "Squall processes events through a tree of filters, iterators and rules",
		Long: `Squall turns webhook calls into events, runs every event through a processing
tree of filters, iterators and rulesets, and executes the actions of the rules
that match.

Run the whole system in one process, with an example to try (see README.md):

  squall dev

Try a tree on an event without any server:

  squall process --tree tree.json --event event.json`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newProcessCommand(), newTestCommand(), newBacktestCommand(), newTreeCommand(), newImportTornadoCommand(), newExportCommand(), newDeadLettersCommand(), newAuditCommand(), newTokenCommand(), newDevCommand(), newMasterCommand(), newSatelliteCommand(), newEngineCommand(), newBenchCommand(), newVersionCommand(), newWebhookCommand(), newStatusCommand(), newBrokerCommand(), newBackupCommand(), newRestoreCommand())
	return root
}

// printJSON writes v as a command's --json output does: indented by two
// spaces.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
