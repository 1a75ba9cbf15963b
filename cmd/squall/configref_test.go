package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine"
)

var update = flag.Bool("update", false, "rewrite the generated files (docs/configuration.md)")

const configurationReference = "../../docs/configuration.md"

// TestConfigurationReference renders the configuration reference from the
// commands' flags and fails if docs/configuration.md differs; -update
// rewrites it.
func TestConfigurationReference(t *testing.T) {
	t.Parallel()
	got, err := renderConfigurationReference(newRootCommand(strings.NewReader(""), io.Discard, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configurationReference, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(configurationReference)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is out of date: run go test ./cmd/squall -run TestConfigurationReference -update\n%s", firstDifference(want, got))
	}
}

// firstDifference shows the first line where two texts differ.
func firstDifference(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  file:      %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}

// envSuffix is what documentEnv appends to a flag's usage.
var envSuffix = regexp.MustCompile(` \[((?:SQUALL|OTEL)_[A-Z0-9_]+)\]$`)

// machineDefaults describes the flag defaults that depend on the machine
// the reference is generated on; check returns the default the command
// must have on this machine, so that a changed formula is noticed.
var machineDefaults = map[string]struct {
	text  string
	check func() string
}{
	"engine --workers": {
		text:  fmt.Sprintf("2 × GOMAXPROCS, at most %d", engine.MaxWorkers),
		check: func() string { return strconv.Itoa(min(2*runtime.GOMAXPROCS(0), engine.MaxWorkers)) },
	},
}

// renderConfigurationReference writes the reference of every command's
// flags and environment variables.
func renderConfigurationReference(root *cobra.Command) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from the commands' flags by TestConfigurationReference
     (cmd/squall/configref_test.go); do not edit. After changing a flag, run
     go test ./cmd/squall -run TestConfigurationReference -update -->

Squall is configured with command-line flags. The long-running commands also read every flag
from an environment variable: ` + "`SQUALL_`" + ` and the flag name in upper case with dashes as
underscores (` + "`--kafka-brokers`" + ` is ` + "`SQUALL_KAFKA_BROKERS`" + `); the ` + "`--otel-*`" + ` flags read the standard
OpenTelemetry variables instead (` + "`OTEL_EXPORTER_OTLP_ENDPOINT`" + ` and others; see the Tracing section of
docs/operations.md). A flag given on the command line wins
over its variable, and an empty variable counts as unset. List flags (` + "`strings`" + `) take
comma-separated values, in a flag or a variable, and can be repeated on the command line.
Durations are written like ` + "`500ms`, `30s`, `5m`" + `. Boolean variables take ` + "`true`" + ` or ` + "`false`" + `.

` + "`squall COMMAND --help`" + ` prints the same list for one command. The files under ` + "`deploy/`" + `
use these flags and variables; ` + "`TestDeploy`" + ` checks them against the binary.

| command | what it does |
|---|---|
`)
	cmds := allCommands(root)
	for _, c := range cmds {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.CommandPath(), anchor(c.CommandPath()), cell(c.Short))
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n\n```\n%s\n```\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."), c.UseLine())
		var rows []string
		withEnv := 0
		var err error
		visit := func(f *pflag.Flag) {
			if f.Name == "help" || f.Hidden || err != nil {
				return
			}
			typ, usage := pflag.UnquoteUsage(f)
			env := "—"
			if m := envSuffix.FindStringSubmatch(usage); m != nil {
				if m[1] != flagEnv(f) {
					err = fmt.Errorf("%s --%s documents %s, want %s", c.CommandPath(), f.Name, m[1], flagEnv(f))
				}
				env, usage = "`"+m[1]+"`", strings.TrimSuffix(usage, m[0])
				withEnv++
			}
			def := f.DefValue
			if md, ok := machineDefaults[c.Name()+" --"+f.Name]; ok {
				if want := md.check(); def != want {
					err = fmt.Errorf("%s --%s defaults to %s on this machine, want %s (%s): update machineDefaults", c.CommandPath(), f.Name, def, want, md.text)
				}
				def = md.text
			} else {
				def = defaultCell(def)
			}
			name := "`--" + f.Name
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + ", --" + f.Name
			}
			if typ != "" {
				name += " " + typ
			}
			rows = append(rows, fmt.Sprintf("| %s` | %s | %s | %s |", name, env, def, cell(usage)))
		}
		c.LocalFlags().VisitAll(visit)
		c.InheritedFlags().VisitAll(visit)
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			b.WriteString("\nNo flags.\n")
			continue
		}
		if withEnv != 0 && withEnv != len(rows) {
			return nil, fmt.Errorf("%s: %d of %d flags read an environment variable: all or none", c.CommandPath(), withEnv, len(rows))
		}
		if withEnv == 0 {
			b.WriteString("\nFlags only: this command reads no environment variables.\n")
		}
		b.WriteString("\n| flag | environment | default | description |\n|---|---|---|---|\n")
		b.WriteString(strings.Join(rows, "\n") + "\n")
	}
	return b.Bytes(), nil
}

// allCommands returns the runnable commands under root, depth first.
func allCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Runnable() {
			out = append(out, c)
		}
		out = append(out, allCommands(c)...)
	}
	return out
}

// anchor is the GitHub anchor of a "## squall x" heading.
func anchor(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// defaultCell formats a flag's default; no default is an empty cell.
func defaultCell(def string) string {
	switch def {
	case "", "[]":
		return ""
	}
	return "`" + cell(def) + "`"
}
