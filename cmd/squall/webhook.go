package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/webhooks"
)

func newWebhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhook",
		Short:   "Tools for webhook files",
		Args:    cobra.NoArgs,
		Example: `  squall webhook check webhooks/*.json`,
	}
	cmd.AddCommand(newWebhookCheckCommand())
	return cmd
}

func newWebhookCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "Check webhook files as a satellite loads them",
		Long: `Check reads each webhook file with the code a satellite loads its webhook
folder with: the JSON and its fields, the collector's expressions, the
signature scheme, tokens and secrets ("file" entries are read, relative to
the file's directory, and must be readable by their owner only; "env"
entries are read from this environment), the token length, and ids used by
two of the files.

It prints one line per problem, naming the file and the field, and exits 1
when there is any; otherwise one line per file with its webhook's id, and
exits 0. Run it before dropping files into a satellite's --webhooks-dir, as
the user the satellite runs as.`,
		Example: `  squall webhook check webhooks/github.json
  squall webhook check new/*.json && cp new/*.json /etc/squall/webhooks/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			return checkWebhooks(cmd.OutOrStdout(), paths, os.LookupEnv)
		},
	}
}

// checkWebhooks checks the webhook files at paths (webhooks.LoadFiles)
// and prints the outcome: an error when any has a problem.
func checkWebhooks(out io.Writer, paths []string, lookupEnv func(string) (string, bool)) error {
	valid, problems := webhooks.LoadFiles(paths, lookupEnv)
	lines := 0
	for _, p := range problems {
		for _, e := range leafErrors(p.Err) {
			fmt.Fprintf(out, "%s: %v\n", p.Name, e)
			lines++
		}
	}
	if lines > 0 {
		return fmt.Errorf("webhook check: %d problems in %d files", lines, len(problems))
	}
	for _, path := range paths {
		if w := valid[path]; w != nil {
			fmt.Fprintf(out, "%s: ok, webhook %s\n", path, w.ID)
		}
	}
	return nil
}

// leafErrors splits err into the errors errors.Join joined in it, at any
// depth: each one a problem of its own.
func leafErrors(err error) []error {
	// Only the error itself: a joined error deeper down (a field's
	// entries) is one problem of the field that wraps it.
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leafErrors(e)...)
	}
	return out
}
