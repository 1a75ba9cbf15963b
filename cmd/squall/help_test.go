package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelp_Examples walks the whole command tree, commands added later
// included, and wants an Examples section in every command's --help.
func TestHelp_Examples(t *testing.T) {
	t.Parallel()
	root := newRootCommand(strings.NewReader(""), io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			n++
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("%q has no Example: its --help shows no Examples section", sub.CommandPath())
			} else if !strings.Contains(sub.Example, "squall ") {
				t.Errorf("%q: the Example shows no squall command line:\n%s", sub.CommandPath(), sub.Example)
			}
			for _, line := range strings.Split(sub.Example, "\n") {
				checkExampleLine(t, sub.CommandPath(), line)
			}
			walk(sub)
		}
	}
	walk(root)
	if n < 10 {
		t.Fatalf("walked %d commands: the tree was not built", n)
	}
}

// checkExampleLine checks the squall command lines of an example: each
// names a command, with flags it has (a new root per line: parsing sets
// the flags).
func checkExampleLine(t *testing.T, path, line string) {
	t.Helper()
	for _, seg := range strings.FieldsFunc(line, func(r rune) bool { return r == '|' || r == '&' || r == ';' }) {
		_, cmdline, ok := strings.Cut(seg, "squall ")
		if !ok {
			continue
		}
		if i := strings.Index(cmdline, " > "); i >= 0 {
			cmdline = cmdline[:i]
		}
		args := shellFields(cmdline)
		root := newRootCommand(strings.NewReader(""), io.Discard, io.Discard)
		root.InitDefaultVersionFlag()
		c, rest, err := root.Find(args)
		if err == nil {
			err = c.ParseFlags(rest)
		}
		if err != nil {
			t.Errorf("%q: example %q: %v", path, strings.TrimSpace(seg), err)
		}
	}
}
