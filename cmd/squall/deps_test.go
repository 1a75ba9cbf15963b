package main

import (
	"cmp"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// maxLinkedPackages is the budget of packages the squall binary links,
// standard library included (what `go list -deps ./cmd/squall` lists): about
// 600, of which about 130 came with the OpenTelemetry SDK and its two
// OTLP exporters (gRPC and its protobuf dependencies; the HTTP exporter
// alone pulls in nearly as many). Importing the root package of
// go-elasticsearch (or its esutil) alone would add about 860.
const maxLinkedPackages = 650

// TestLinkedPackages keeps the binary's dependency tree lean: a cold build
// compiles every package it links.
func TestLinkedPackages(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{else}}std{{end}}", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("squall links %d packages (budget %d)", len(lines), maxLinkedPackages)
	if len(lines) <= maxLinkedPackages {
		return
	}
	t.Errorf("squall links %d packages, more than the budget of %d; the biggest contributors:\n%s",
		len(lines), maxLinkedPackages, strings.Join(biggestModules(lines, 10), "\n"))
}

// biggestModules counts the lines "package module" by module and returns
// the n biggest as "count module", largest first.
func biggestModules(lines []string, n int) []string {
	counts := map[string]int{}
	for _, l := range lines {
		_, mod, _ := strings.Cut(l, " ")
		counts[mod]++
	}
	mods := make([]string, 0, len(counts))
	for m := range counts {
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	var top []string
	for _, m := range mods[:min(n, len(mods))] {
		top = append(top, fmt.Sprintf("%6d %s", counts[m], m))
	}
	return top
}
