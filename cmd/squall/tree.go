package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/store"
)

// newTreeCommand is the "squall tree" group: the active tree's versions
// on a master (history, show, diff, rollback) and the drift of a file
// from the active tree. Subcommands of other files join it with
// AddCommand.
func newTreeCommand() *cobra.Command {
	var tc treeClient
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Manage the processing tree of a master: history, show, diff, rollback, apply",
		Long: `Every deploy (and every rollback) records a version of the active tree on the
masters: a number that only grows, the author, the leader's time, an optional
message (squall tree rollback --message, or ?message= on deploy), a content hash
and the counts of nodes and rules. The cluster keeps the last --keep-versions of
them (squall master; default 200).

The commands talk to a master (--master) with a token (--token-file): view to
read, edit to roll back, on the authorization --auth (needed only when the token
has several). A token scoped below the root sees and rolls back the subtree at
its node only.

squall tree apply deploys a tree kept in a file after its rule tests pass
(config as code; see squall tree apply --help).`,
		Example: `  squall tree history --master http://127.0.0.1:8080 --token-file admin.token
  squall tree show 12 --master http://127.0.0.1:8080 --token-file admin.token -o v12.json
  squall tree diff 11 12 --master http://127.0.0.1:8080 --token-file admin.token
  squall tree diff --file tree.json --exit-code --master http://127.0.0.1:8080 --token-file ci.token
  squall tree rollback 11 --message "undo 12" --master http://127.0.0.1:8080 --token-file admin.token
  squall tree apply --file tree.json --tests tests --dry-run --master http://127.0.0.1:8080 --token-file ci.token`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&tc.masterURL, "master", "", "base URL of a master (e.g. http://127.0.0.1:8080)")
	pf.StringVar(&tc.tokenFile, "token-file", "", "file holding the API token (view; edit to roll back)")
	pf.StringVar(&tc.auth, "auth", "", "authorization of the token to use (default: the token's only one)")
	cmd.AddCommand(newTreeHistoryCommand(&tc), newTreeShowCommand(&tc), newTreeDiffCommand(&tc), newTreeRollbackCommand(&tc),
		newTreeApplyCommand(), newTreeTestsCommand(&tc))
	return cmd
}

// treeClient is the connection the tree commands share.
type treeClient struct {
	masterURL, tokenFile, auth string
}

// client checks the flags and returns the API client.
func (tc *treeClient) client() (*apiClient, error) {
	if tc.masterURL == "" {
		return nil, errors.New("--master is required (the base URL of a master, e.g. http://127.0.0.1:8080)")
	}
	if tc.tokenFile == "" {
		return nil, errors.New("--token-file is required (a file holding the API token)")
	}
	return newAPIClient(tc.masterURL, tc.tokenFile)
}

// path returns the versions API path below VersionsPath with query q
// (nil: none) and the authorization.
func (tc *treeClient) path(sub string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	if tc.auth != "" {
		q.Set("auth", tc.auth)
	}
	p := api.VersionsPath + sub
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

func newTreeHistoryCommand(tc *treeClient) *cobra.Command {
	var limit int
	var before uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history [--limit N] [--before N] [--json]",
		Short: "List the versions of the active tree, newest first",
		Long: `History lists the versions the cluster keeps, newest first: number, time (UTC),
author, counts of nodes and rules, the start of the content hash, and the
message. A rollback shows the version it deployed again; a scoped deploy or
rollback, its node. --before N lists the versions older than N (paging).`,
		Example: `  squall tree history --master http://127.0.0.1:8080 --token-file admin.token
  squall tree history --limit 10 --before 40 --json --master http://127.0.0.1:8080 --token-file admin.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tc.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if before > 0 {
				q.Set("before", strconv.FormatUint(before, 10))
			}
			var list api.VersionList
			if err := c.do(http.MethodGet, tc.path("", q), "", nil, &list); err != nil {
				return fmt.Errorf("history: %w", err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, list)
			}
			if len(list.Versions) == 0 {
				_, err := fmt.Fprintln(out, "no versions (a version is recorded by each deploy once every master runs a release with versions)")
				return err
			}
			w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tTIME\tAUTHOR\tNODES\tRULES\tHASH\tMESSAGE")
			for _, v := range list.Versions {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", v.Number, time.UnixMilli(v.TimeMS).UTC().Format(time.RFC3339),
					v.Author, v.Nodes, v.Rules, v.Hash[:min(12, len(v.Hash))], versionNote(v))
			}
			if list.NextBefore > 0 {
				fmt.Fprintf(w, "(older versions: --before %d)\n", list.NextBefore)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 50, "how many versions to list (at most 1000)")
	f.Uint64Var(&before, "before", 0, "list the versions older than this one")
	f.BoolVar(&asJSON, "json", false, "print the API's JSON answer")
	return cmd
}

// versionNote is the message column of a version.
func versionNote(v store.Version) string {
	var parts []string
	if v.RollbackOf > 0 {
		parts = append(parts, fmt.Sprintf("[rollback to %d]", v.RollbackOf))
	}
	if len(v.Scope) > 0 {
		parts = append(parts, "[scope "+config.PathString(v.Scope)+"]")
	}
	if v.Message != "" {
		parts = append(parts, strings.ReplaceAll(v.Message, "\n", " "))
	}
	return strings.Join(parts, " ")
}

// versionArg checks a version argument: a number, or "active".
func versionArg(s string) (string, error) {
	if s == "active" {
		return s, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err != nil || n == 0 {
		return "", fmt.Errorf("%q is not a version number (see squall tree history) or \"active\"", s)
	}
	return s, nil
}

func newTreeShowCommand(tc *treeClient) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show N|active [-o FILE]",
		Short: "Print a version's tree as an export file",
		Long: `Show prints the tree of version N (or of the active tree) as an export file,
the format squall process reads and the API imports into a draft; a token
scoped below the root gets the subtree at its node.`,
		Example: `  squall tree show 12 --master http://127.0.0.1:8080 --token-file admin.token
  squall tree show 12 -o v12.json --master http://127.0.0.1:8080 --token-file admin.token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := versionArg(args[0])
			if err != nil {
				return err
			}
			c, err := tc.client()
			if err != nil {
				return err
			}
			var file json.RawMessage
			if err := c.do(http.MethodGet, tc.path("/"+n, nil), "", nil, &file); err != nil {
				return fmt.Errorf("show: %w", err)
			}
			return writeTreeFile(cmd.OutOrStdout(), file, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the file here instead of standard output")
	return cmd
}

// exitDrift is the exit code of squall tree diff --exit-code when the
// trees differ.
const exitDrift = 2

func newTreeDiffCommand(tc *treeClient) *cobra.Command {
	var file string
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff (A B | --file FILE) [--exit-code]",
		Short: "Compare two versions, or a tree file with the active tree, node by node",
		Long: `Diff prints what changes, node by node, from version A to version B (either may
be "active"), or, with --file, from the active tree to the export file FILE:
"+ path" a node added, "- path" removed, "~ path" changed (its fields, its
rules, or the order of its children).

With --exit-code it exits with 2 when there is a difference (0 when none, 1 on
an error): a scheduled CI job runs squall tree diff --file tree.json --exit-code
to detect drift between the repository and the cluster. A token scoped below
the root compares the subtree at its node; FILE then holds that subtree (as
squall tree show writes it).`,
		Example: `  squall tree diff 11 12 --master http://127.0.0.1:8080 --token-file admin.token
  squall tree diff 12 active --master http://127.0.0.1:8080 --token-file admin.token
  squall tree diff --file tree.json --exit-code --master http://127.0.0.1:8080 --token-file ci.token`,
		Args: func(cmd *cobra.Command, args []string) error {
			if file != "" && len(args) != 0 {
				return errors.New("give either two versions or --file, not both")
			}
			if file == "" && len(args) != 2 {
				return errors.New("give two versions (A B) or --file FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tc.client()
			if err != nil {
				return err
			}
			var changes []config.Change
			if file != "" {
				changes, err = diffFile(tc, c, file)
			} else {
				changes, err = diffVersions(tc, c, args[0], args[1])
			}
			if err != nil {
				return err
			}
			if err := printChanges(cmd.OutOrStdout(), changes); err != nil {
				return err
			}
			if exitCode && len(changes) > 0 {
				what := "the active tree differs from " + file
				if file == "" {
					what = fmt.Sprintf("versions %s and %s differ", args[0], args[1])
				}
				return &exitCodeError{code: exitDrift, err: fmt.Errorf("%s: %d changes", what, len(changes))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "export file to compare with the active tree")
	f.BoolVar(&exitCode, "exit-code", false, "exit with 2 when there is a difference")
	return cmd
}

// diffVersions asks the master for the diff of two versions.
func diffVersions(tc *treeClient, c *apiClient, a, b string) ([]config.Change, error) {
	a, err := versionArg(a)
	if err != nil {
		return nil, err
	}
	if b, err = versionArg(b); err != nil {
		return nil, err
	}
	var d api.VersionDiff
	if err := c.do(http.MethodGet, tc.path("/"+a+"/diff/"+b, nil), "", nil, &d); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return d.Changes, nil
}

// diffFile compares the active tree (as the token sees it) with a file.
func diffFile(tc *treeClient, c *apiClient, file string) ([]config.Change, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	local, err := config.DecodeExport(raw)
	if err != nil {
		return nil, fmt.Errorf("--file %s: %w", file, err)
	}
	var activeFile json.RawMessage
	if err := c.do(http.MethodGet, tc.path("/active", nil), "", nil, &activeFile); err != nil {
		return nil, fmt.Errorf("diff: active tree: %w", err)
	}
	active, err := config.DecodeExport(activeFile)
	if err != nil {
		return nil, fmt.Errorf("diff: active tree: %w", err)
	}
	return config.Diff(active.Node, local.Node), nil
}

// printChanges writes one line per change.
func printChanges(w io.Writer, changes []config.Change) error {
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "no differences")
		return err
	}
	var b strings.Builder
	for _, c := range changes {
		b.WriteString(changeLine(c) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newTreeRollbackCommand(tc *treeClient) *cobra.Command {
	var force bool
	var message string
	cmd := &cobra.Command{
		Use:   "rollback N [--force] [--message M]",
		Short: "Deploy version N's tree again, as a new version",
		Long: `Rollback makes the tree of version N the active tree again, in one replicated
step, recorded as a new version (with --message). It needs the permission of a
deploy (edit); a token scoped below the root rolls back the subtree at its node
only, keeping what changed elsewhere since.

It is refused while a draft exists (someone is preparing a change), unless
--force: the draft is then kept as it is.`,
		Example: `  squall tree rollback 11 --message "12 broke the mail rule" --master http://127.0.0.1:8080 --token-file admin.token
  squall tree rollback 11 --force --master http://127.0.0.1:8080 --token-file admin.token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := versionArg(args[0])
			if err != nil || n == "active" {
				return fmt.Errorf("%q is not a version number (see squall tree history)", args[0])
			}
			if err := store.CheckVersionMessage(message); err != nil {
				return fmt.Errorf("--message: %w", err)
			}
			c, err := tc.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if force {
				q.Set("force", "true")
			}
			if message != "" {
				q.Set("message", message)
			}
			var res api.RollbackResult
			if err := c.do(http.MethodPost, tc.path("/"+n+"/rollback", q), "", nil, &res); err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "rolled back to version %s: the active tree is version %d (hash %s)\n", n, res.Version.Number, res.Version.Hash)
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "roll back even though a draft exists (the draft is kept)")
	f.StringVar(&message, "message", "", "message recorded with the new version (at most 1024 bytes)")
	return cmd
}
