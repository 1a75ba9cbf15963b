package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/ruletest"
	"github.com/squallhq/squall/master/api"
)

// treeApply is one run of squall tree apply.
type treeApply struct {
	file, testsDir, message    string
	masterURL, tokenFile, auth string
	dryRun, force              bool
	out, warn                  io.Writer
}

func newTreeApplyCommand() *cobra.Command {
	ta := &treeApply{}
	cmd := &cobra.Command{
		Use:   "apply --file TREE [--tests DIR] [--message M] [--dry-run] --master URL --token-file F",
		Short: "Make a tree from a file the active tree of a master, after its tests pass",
		Long: `Apply deploys a processing tree kept in a file (config as code): it runs the
rule tests of --tests against the tree, creates a draft, imports the tree
into it, runs the tests again against the draft as the master holds it,
attaches them to the draft (masters at feature level 5 run them once more
before they deploy, and keep them with the version: see squall tree tests),
and deploys the draft. A draft starts with the active tree's tests, so
without --tests the masters still run those. It prints the changes it applies to the active tree, node
by node and rule by rule.

TREE is an export file of the whole tree (its top node is the root filter, as
squall export writes it) or a Tornado rules folder (as squall import-tornado
reads it). DIR holds rule test files (*.json, docs/rule-tests.md). Actions
that no Squall executor handles are listed on standard error as a warning.

When a test fails, apply prints the failures and stops: the master is left
as it was (a draft it created is deleted). When the tree is already the
active tree, it deploys nothing. --message is recorded with the deploy.

With --dry-run it reads the active tree, prints the changes and the test
results, and changes nothing (it creates no draft).

Creating a draft replaces the master's current one: when there is one,
apply names its owner and stops, unless --force. Apply deletes the draft
it created once deployed, or when it stops. The token (--token-file)
needs edit on the authorization --auth, at the root.

Exit status: 0 once deployed (or nothing to change), 1 when a test fails or
the master refuses, 2 when the tree or a test file is bad.`,
		Example: `  # What would change, and do the tests pass?
  squall tree apply --file tree.json --tests tests --dry-run --master https://squall-master:8080 --token-file ci.token

  # Apply it, with a message for the tree's history
  squall tree apply --file tree.json --tests tests --message "route disk alerts to storage" --master https://squall-master:8080 --token-file ci.token

  # A Tornado rules folder
  squall tree apply --file rules.d --master https://squall-master:8080 --token-file ci.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ta.out, ta.warn = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return ta.run()
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	f := cmd.Flags()
	f.StringVar(&ta.file, "file", "", "export file or Tornado rules folder of the whole tree (required)")
	f.StringVar(&ta.testsDir, "tests", "", "folder of rule test files (*.json) that must pass before the deploy")
	f.StringVar(&ta.message, "message", "", "message recorded with the deploy")
	f.BoolVar(&ta.dryRun, "dry-run", false, "print the changes and the test results; change nothing")
	f.StringVar(&ta.masterURL, "master", "", "base URL of a master (e.g. http://127.0.0.1:8080) (required)")
	f.StringVar(&ta.tokenFile, "token-file", "", "file holding the API token (edit on --auth) (required)")
	f.StringVar(&ta.auth, "auth", "all", "authorization of the token to use")
	f.BoolVar(&ta.force, "force", false, "replace the master's current draft, whoever owns it")
	return cmd
}

// errTestsFailed says that a rule test failed; the failures are printed.
var errTestsFailed = errors.New("tree apply: a rule test failed")

func (ta *treeApply) run() error {
	switch {
	case ta.file == "":
		return badInput(errors.New("tree apply: --file is required: the export file or Tornado rules folder to apply"))
	case ta.masterURL == "" || ta.tokenFile == "":
		return badInput(errors.New("tree apply: --master and --token-file are required"))
	}
	root, err := loadTree(ta.file)
	if err != nil {
		return badInput(err)
	}
	if root.Kind != config.KindFilter || root.Name != config.RootName {
		return badInput(fmt.Errorf("tree apply: %s holds the %s %q, not a whole tree: apply replaces the whole tree, so the file's top node is the root filter (squall export writes it so)", ta.file, root.Kind, root.Name))
	}
	if bad := action.UnsupportedInTree(root, nil); len(bad) > 0 {
		// The masters accept them (engines may enable executors this
		// binary lacks); the engines without one dead-letter their events.
		fmt.Fprintf(ta.warn, "tree apply: warning: %s no executor in Squall:\n", actionsHave(len(bad)))
		for _, a := range bad {
			fmt.Fprintf(ta.warn, "  action %q in ruleset %s, rule %s\n", a.ID, a.Ruleset, a.Rule)
		}
	}
	var files []*ruletest.File
	if ta.testsDir != "" {
		if files, err = loadTestFiles([]string{ta.testsDir}); err != nil {
			return badInput(err)
		}
	}
	// The tests first: a failure changes nothing, not even a draft.
	if err := ta.test(root, files, ""); err != nil {
		return err
	}
	c, err := newAPIClient(ta.masterURL, ta.tokenFile)
	if err != nil {
		return badInput(err)
	}
	if ta.dryRun {
		active, err := c.exportTree(ta.auth, "")
		if err != nil {
			return err
		}
		ta.printChanges(config.Diff(active, root), "would change")
		cur, err := c.currentDraft()
		if err != nil {
			return err
		}
		if cur != nil {
			fmt.Fprintf(ta.out, "the master has a draft, %s, owned by %q: apply would stop, or replace it with --force\n", cur.ID, cur.Owner)
		}
		_, err = fmt.Fprintln(ta.out, "dry run: nothing was changed")
		return err
	}
	draftID, err := c.newDraft("tree apply", ta.auth, "Deploy or delete it, or pass --force to replace it", ta.force, ta.warn)
	if err != nil {
		return err
	}
	defer func() {
		// Leave no draft behind: before the deploy, the master stays as
		// it was; after it, the draft is the active tree.
		path := "/api/v2_beta/config/drafts/" + url.PathEscape(ta.auth) + "/" + url.PathEscape(draftID)
		if err := c.do(http.MethodDelete, path, "", nil, nil); err != nil {
			fmt.Fprintf(ta.warn, "tree apply: warning: delete draft %s: %v\n", draftID, err)
		}
	}()
	// A new draft holds the active tree: the changes are from it.
	base, err := c.exportTree(ta.auth, draftID)
	if err != nil {
		return err
	}
	changes := config.Diff(base, root)
	testsChanged, err := ta.attachTests(c, draftID)
	if err != nil {
		return err
	}
	if len(changes) == 0 && !testsChanged {
		_, err := fmt.Fprintln(ta.out, "tree apply: the active tree is already the file's: nothing to deploy")
		return err
	}
	ta.printChanges(changes, "applying")
	if len(changes) > 0 {
		export, err := config.EncodeExport(root)
		if err != nil {
			return err
		}
		if err := c.importInto(ta.auth, draftID, "root", export); err != nil {
			return err
		}
	}
	// Again against the tree the master holds, which is what deploys.
	held, err := c.exportTree(ta.auth, draftID)
	if err != nil {
		return err
	}
	if err := ta.test(held, files, "draft "+draftID+": "); err != nil {
		return err
	}
	path := "/api/v2_beta/config/drafts/" + url.PathEscape(ta.auth) + "/" + url.PathEscape(draftID) + "/deploy"
	if ta.message != "" {
		path += "?" + url.Values{"message": {ta.message}}.Encode()
	}
	if err := c.do(http.MethodPost, path, "", nil, nil); err != nil {
		return fmt.Errorf("deploy draft %s: %w", draftID, err)
	}
	_, err = fmt.Fprintf(ta.out, "deployed draft %s\n", draftID)
	return err
}

// attachTests puts the files of --tests on the draft, so that the
// masters run them before they deploy it and keep them with the version
// (docs/decisions.md decision 62); it reports whether they differ from
// the tests the draft started with (the active tree's). Masters below
// feature level 5 keep no tests: a warning says so, and the tests ran
// here only.
func (ta *treeApply) attachTests(c *apiClient, draftID string) (bool, error) {
	if ta.testsDir == "" {
		return false, nil
	}
	bodies, err := testFileBodies([]string{ta.testsDir})
	if err != nil {
		return false, badInput(err)
	}
	q := url.Values{"auth": {ta.auth}, "draft": {draftID}}.Encode()
	var before api.DraftTestsView
	if err := c.do(http.MethodGet, api.DraftTestsPath+"?"+q, "", nil, &before); err != nil && !keepsNoTests(err) {
		return false, fmt.Errorf("read the draft's tests: %w", err)
	}
	v, err := c.putDraftTests(api.DraftTestsPath+"?"+q, bodies)
	if errors.Is(err, errFeatureLevel) {
		fmt.Fprintf(ta.warn, "tree apply: warning: %v: the tests ran here only, the masters do not keep them\n", err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if v.Tested != before.Tested {
		fmt.Fprintf(ta.out, "tests: attached %d test files (%d cases) to draft %s\n", len(v.Files), v.Cases, draftID)
	}
	return v.Tested != before.Tested, nil
}

// test runs the test files against root, when there are some, and prints
// the failures (or the summary); prefix starts the printed lines.
func (ta *treeApply) test(root *config.Node, files []*ruletest.File, prefix string) error {
	if len(files) == 0 {
		return nil
	}
	results, err := runTests(root, files)
	if err != nil {
		return badInput(fmt.Errorf("tree %s: %w", ta.file, err))
	}
	summary := printResults(ta.out, results, false)
	if summary.failed > 0 {
		return fmt.Errorf("%w: %s%s; nothing was changed", errTestsFailed, prefix, summary)
	}
	_, err = fmt.Fprintf(ta.out, "tests: %sok: %s\n", prefix, summary)
	return err
}

// printChanges writes the changes after a title, one a line, as squall
// tree diff writes them: "+ path" a node added, "- path" removed, "~ path:
// what" changed.
func (ta *treeApply) printChanges(changes []config.Change, verb string) {
	if len(changes) == 0 {
		fmt.Fprintln(ta.out, "changes: none: the active tree is already the file's")
		return
	}
	noun := "changes"
	if len(changes) == 1 {
		noun = "change"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s to the active tree:\n", verb, len(changes), noun)
	for _, c := range changes {
		b.WriteString("  " + changeLine(c) + "\n")
	}
	_, _ = io.WriteString(ta.out, b.String())
}

// changeLine writes one change as squall tree diff does: "+ path" a node
// added, "- path" removed, "~ path: what" changed.
func changeLine(c config.Change) string {
	switch c.Op {
	case config.ChangeAdded:
		return "+ " + c.Path
	case config.ChangeRemoved:
		return "- " + c.Path
	}
	return "~ " + c.Path + ": " + changeSummary(c)
}

// changeSummary says what changed in a node: its fields, its rules, the
// order of its children.
func changeSummary(c config.Change) string {
	var what []string
	if len(c.Fields) > 0 {
		what = append(what, strings.Join(c.Fields, ", "))
	}
	for _, r := range []struct {
		verb  string
		names []string
	}{{"rules added", c.RulesAdded}, {"rules removed", c.RulesRemoved}, {"rules changed", c.RulesChanged}} {
		if len(r.names) > 0 {
			what = append(what, r.verb+" "+strings.Join(r.names, ", "))
		}
	}
	if c.RulesReordered {
		what = append(what, "rules reordered")
	}
	if c.ChildrenReordered {
		what = append(what, "children reordered")
	}
	return strings.Join(what, "; ")
}
