package tree

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// minGoldenCases is how many cases testdata/golden must hold at least.
const minGoldenCases = 30

// TestTree_golden evaluates each case of testdata/golden, a directory
// holding tree.json (an export file) and event.json (an event), with
// Compile and Process, and compares the result and the actions with the
// case's result.golden.json; the live evaluation (Actions,
// MatchedActions) must yield the same actions. go test -update rewrites
// the golden files; testdata/golden/README.md lists the cases and where
// each comes from.
func TestTree_golden(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("golden", name)
			tr := mustCompile(t, exportFile(t, filepath.Join(dir, "tree.json")))
			ev := eventFile(t, filepath.Join(dir, "event.json"))
			res, actions := processLive(t, tr, ev)
			got, err := json.MarshalIndent(struct {
				Result  *ProcessedNode `json:"result"`
				Actions []Action       `json:"actions"`
			}{res, actions}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(dir, "result.golden.json"), got)
		})
	}
	if n < minGoldenCases {
		t.Errorf("%d golden cases, want at least %d", n, minGoldenCases)
	}
}
