package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/master/api"
)

// newTreeTestsCommand is "squall tree tests": the rule tests attached to
// the master's draft (docs/rule-tests.md, "Tests on the masters").
func newTreeTestsCommand(tc *treeClient) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tests",
		Short: "Show, replace or run the rule tests attached to the master's draft",
		Long: `The masters keep rule tests with the draft (feature level 5 on every master):
a new draft starts with the tests of the active tree, every deploy runs them
against the draft first and is refused when one fails, and each version keeps
the tests it was deployed with (squall tree rollback brings them back).

put replaces the draft's tests with the files given (test files or folders of
*.json files, named by their base names); get lists them (-o DIR writes them
as files); run runs them against the draft, as a deploy would.`,
		Example: `  squall tree tests put tests --master http://127.0.0.1:8080 --token-file admin.token
  squall tree tests get -o tests --master http://127.0.0.1:8080 --token-file admin.token
  squall tree tests run --master http://127.0.0.1:8080 --token-file admin.token`,
		Args: cobra.NoArgs,
	}
	var outDir string
	var asJSON bool
	get := &cobra.Command{
		Use:   "get [-o DIR] [--json]",
		Short: "List the draft's test files and their cases",
		Example: `  squall tree tests get --master http://127.0.0.1:8080 --token-file admin.token
  squall tree tests get -o tests --master http://127.0.0.1:8080 --token-file admin.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tc.client()
			if err != nil {
				return badInput(err)
			}
			var v api.DraftTestsView
			if err := c.do(http.MethodGet, tc.testsPath(""), "", nil, &v); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(v)
			}
			return writeTestsView(cmd.OutOrStdout(), v, outDir)
		},
	}
	get.Flags().StringVarP(&outDir, "output", "o", "", "write the test files into this folder")
	get.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	put := &cobra.Command{
		Use:   "put FILE|DIR...",
		Short: "Replace the draft's tests (no argument: remove them)",
		Example: `  squall tree tests put tests --master http://127.0.0.1:8080 --token-file admin.token
  squall tree tests put tests/routing.json tests/quiet.json --master http://127.0.0.1:8080 --token-file admin.token`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tc.client()
			if err != nil {
				return badInput(err)
			}
			files, err := testFileBodies(args)
			if err != nil {
				return badInput(err)
			}
			v, err := c.putDraftTests(tc.testsPath(""), files)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "draft %s: %s, %d cases\n", v.Draft, plural(len(v.Files), "test file"), v.Cases)
			return err
		},
	}
	run := &cobra.Command{
		Use:     "run",
		Short:   "Run the draft's tests against the draft (exit 1 when one fails)",
		Example: `  squall tree tests run --master http://127.0.0.1:8080 --token-file admin.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tc.client()
			if err != nil {
				return badInput(err)
			}
			var r api.TestRun
			if err := c.do(http.MethodPost, tc.testsPath("/run"), "", nil, &r); err != nil {
				return err
			}
			return printTestRun(cmd.OutOrStdout(), r)
		},
	}
	cmd.AddCommand(get, put, run)
	return cmd
}

// testsPath returns the draft tests API path below DraftTestsPath with
// the authorization.
func (tc *treeClient) testsPath(sub string) string {
	p := api.DraftTestsPath + sub
	if tc.auth != "" {
		p += "?" + url.Values{"auth": {tc.auth}}.Encode()
	}
	return p
}

// testFileBodies reads test files (folders: their *.json files), checked
// as squall test checks them, named by their base names.
func testFileBodies(paths []string) ([]api.TestFileBody, error) {
	if len(paths) == 0 {
		return []api.TestFileBody{}, nil
	}
	files, contents, err := readTestFiles(paths)
	if err != nil {
		return nil, err
	}
	out := make([]api.TestFileBody, len(files))
	for i, f := range files {
		var c bytes.Buffer
		if err := json.Compact(&c, contents[i]); err != nil {
			return nil, fmt.Errorf("test file %s: %w", f.Name, err)
		}
		out[i] = api.TestFileBody{Name: filepath.Base(f.Name), Content: c.Bytes()}
	}
	return out, nil
}

// errFeatureLevel says that the masters are below the level of draft
// tests.
var errFeatureLevel = errors.New("the masters are below feature level 5")

// keepsNoTests reports whether err is the answer of masters that keep no
// draft tests: below feature level 5, or of a release without the route.
func keepsNoTests(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, " FEATURE_LEVEL: ") || strings.Contains(msg, ": 404 ") && !strings.Contains(msg, "DRAFT_NOT_FOUND")
}

// putDraftTests replaces the draft's tests (path: testsPath). A cluster
// below feature level 5 is errFeatureLevel.
func (c *apiClient) putDraftTests(path string, files []api.TestFileBody) (*api.DraftTestsView, error) {
	body, err := json.Marshal(api.DraftTestsBody{Files: files})
	if err != nil {
		return nil, err
	}
	var v api.DraftTestsView
	if err := c.do(http.MethodPut, path, "application/json", bytes.NewReader(body), &v); err != nil {
		if keepsNoTests(err) {
			return nil, fmt.Errorf("%w: %w", errFeatureLevel, err)
		}
		return nil, fmt.Errorf("attach the tests to the draft: %w", err)
	}
	return &v, nil
}

// writeTestsView prints the files and their cases, and writes the files
// into dir when set.
func writeTestsView(w io.Writer, v api.DraftTestsView, dir string) error {
	fmt.Fprintf(w, "draft %s (owner %s): %s, %d cases\n", v.Draft, v.Owner, plural(len(v.Files), "test file"), v.Cases)
	for _, f := range v.Files {
		fmt.Fprintf(w, "%s\n", f.Name)
		for _, c := range f.Cases {
			fmt.Fprintf(w, "  %s\n", c)
		}
		if dir == "" {
			continue
		}
		var out bytes.Buffer
		if err := json.Indent(&out, f.Content, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.Name)), out.Bytes(), 0o644); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
	}
	return nil
}

// printTestRun prints a run's failures and summary; a failure is
// errTestsFailed.
func printTestRun(w io.Writer, r api.TestRun) error {
	for _, f := range r.Files {
		for _, c := range f.Cases {
			for _, fl := range c.Failures {
				fmt.Fprintf(w, "FAIL %s: %q: %s\n", f.File, c.Name, fl.Text)
			}
		}
	}
	if !r.Passed {
		return fmt.Errorf("%w: draft %s: %d of %d cases failed", errTestsFailed, r.Draft, r.Failed, r.Cases)
	}
	_, err := fmt.Fprintf(w, "draft %s: %d cases passed\n", r.Draft, r.Cases)
	return err
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
