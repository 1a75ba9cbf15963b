package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/ruletest"
)

func newTestCommand() *cobra.Command {
	var treePath, junitFile string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test --tree TREE FILE|DIR...",
		Short: "Run rule tests against a processing tree, without any server",
		Long: `Test runs rule test files against a processing tree with the engines'
compiler and evaluator: each case sends one event through the tree and
checks which rules match or do not, the variables they extract and the
actions they resolve (docs/rule-tests.md describes the file format).

TREE is an export file ({"version": "1.1", "Filter": {...}}, as squall export
writes it) or a Tornado rules folder (as squall import-tornado reads it). The
arguments are test files, or folders whose *.json files are test files.

Every failed expectation is printed on one line, with the file, the case,
the rule's path, what was expected and what happened; with --verbose the
passing cases are listed too. --junit writes a JUnit XML report for CI
systems as well.

Exit status: 0 when every case passes, 1 when one fails, 2 when an input is
bad (a file that cannot be read, a tree or a test file that is invalid,
named in the message); nothing is run then.`,
		Example: `  # Run the tests of a repository against its tree
  squall test --tree tree.json tests/*.json

  # A Tornado rules folder, every test file of a folder, a report for CI
  squall test --tree rules.d --junit report.xml tests/`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput(errors.New("test: no test files: name test files or folders holding them"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if treePath == "" {
				return badInput(errors.New(`test: --tree is required: the export file or Tornado rules folder to test`))
			}
			root, err := loadTree(treePath)
			if err != nil {
				return badInput(err)
			}
			files, err := loadTestFiles(args)
			if err != nil {
				return badInput(err)
			}
			results, err := runTests(root, files)
			if err != nil {
				return badInput(fmt.Errorf("tree %s: %w", treePath, err))
			}
			out := cmd.OutOrStdout()
			summary := printResults(out, results, verbose)
			if junitFile != "" {
				if err := writeJUnit(junitFile, results); err != nil {
					return err
				}
			}
			if summary.failed > 0 {
				return fmt.Errorf("test: %s", summary)
			}
			_, err = fmt.Fprintf(out, "ok: %s\n", summary)
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	f := cmd.Flags()
	f.StringVar(&treePath, "tree", "", "export file or Tornado rules folder of the processing tree (required)")
	f.StringVar(&junitFile, "junit", "", "also write a JUnit XML report to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "list the passing cases too")
	return cmd
}

// loadTree reads a processing tree: an export file, or a Tornado rules
// folder; the tree is validated. Errors name the file.
func loadTree(path string) (*config.Node, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	if fi.IsDir() {
		return readRulesFolder(path)
	}
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	if len(data) > maxEventFile {
		return nil, fmt.Errorf("tree %s: larger than %d bytes", path, maxEventFile)
	}
	ex, err := config.DecodeExport(data)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", path, err)
	}
	if err := config.Validate(ex.Node); err != nil {
		return nil, fmt.Errorf("tree %s: %w", path, err)
	}
	return ex.Node, nil
}

// loadTestFiles reads and decodes test files; a folder stands for its
// *.json files (not those of its subfolders), in name order.
func loadTestFiles(paths []string) ([]*ruletest.File, error) {
	files, _, err := readTestFiles(paths)
	return files, err
}

// readTestFiles is loadTestFiles, also returning each file's content.
func readTestFiles(paths []string) ([]*ruletest.File, [][]byte, error) {
	var names []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("test file: %w", err)
		}
		if !fi.IsDir() {
			names = append(names, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, fmt.Errorf("test folder: %w", err)
		}
		n := len(names)
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				names = append(names, filepath.Join(p, e.Name()))
			}
		}
		if len(names) == n {
			return nil, nil, fmt.Errorf("test folder %s: no *.json files", p)
		}
	}
	files := make([]*ruletest.File, 0, len(names))
	contents := make([][]byte, 0, len(names))
	for _, name := range names {
		data, err := readLimited(name)
		if err != nil {
			return nil, nil, fmt.Errorf("test file: %w", err)
		}
		if len(data) > maxEventFile {
			return nil, nil, fmt.Errorf("test file %s: larger than %d bytes", name, maxEventFile)
		}
		f, err := ruletest.Decode(name, data)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
		contents = append(contents, data)
	}
	return files, contents, nil
}

// runTests runs every file against root.
func runTests(root *config.Node, files []*ruletest.File) ([]ruletest.FileResult, error) {
	r, err := ruletest.New(root)
	if err != nil {
		return nil, err
	}
	results := make([]ruletest.FileResult, 0, len(files))
	for _, f := range files {
		results = append(results, r.Run(f))
	}
	return results, nil
}

// testSummary counts cases.
type testSummary struct {
	files, cases, failed int
}

func (s testSummary) String() string {
	files := fmt.Sprintf("%d files", s.files)
	if s.files == 1 {
		files = "1 file"
	}
	if s.failed > 0 {
		return fmt.Sprintf("%d of %d cases failed (%s)", s.failed, s.cases, files)
	}
	if s.cases == 1 {
		return fmt.Sprintf("1 case passed (%s)", files)
	}
	return fmt.Sprintf("%d cases passed (%s)", s.cases, files)
}

// printResults writes a line per failed expectation (and, verbose, per
// passing case) and returns the counts.
func printResults(w io.Writer, results []ruletest.FileResult, verbose bool) testSummary {
	s := testSummary{files: len(results)}
	for _, f := range results {
		for _, c := range f.Cases {
			s.cases++
			if c.Passed() {
				if verbose {
					fmt.Fprintf(w, "ok   %s: %q\n", f.File, c.Name)
				}
				continue
			}
			s.failed++
			for _, fl := range c.Failures {
				fmt.Fprintf(w, "FAIL %s: %q: %s\n", f.File, c.Name, fl)
			}
		}
	}
	return s
}

// writeJUnit writes the JUnit report of results to name.
func writeJUnit(name string, results []ruletest.FileResult) error {
	var buf bytes.Buffer
	if err := ruletest.WriteJUnit(&buf, "squall test", results); err != nil {
		return err
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}
