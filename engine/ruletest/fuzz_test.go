package ruletest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode decodes arbitrary test files and runs those that decode
// against the test tree: neither may panic, and every failure names a rule
// and an expectation.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		oneCase(diskFull, `"match": ["root/alerts/disk/disk_full"], "no_match": ["root/hosts[1]/per_host/down"]`),
		oneCase(diskOK, `"variables": {"root/alerts/disk/disk_full": {"host": {"a": [1, 2.0]}}}`),
		oneCase(notAlert, `"actions": {"root/hosts[x%2Fy]/per_host/down": [{"id": "logger", "payload": {"host": null}}]}`),
		`{"cases": []}`,
	} {
		f.Add([]byte(seed))
	}
	examples, _ := filepath.Glob("../../docs/examples/config-as-code/tests/*.json")
	for _, name := range examples {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	r := newTestRunner(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode("fuzz.json", data)
		if err != nil {
			return
		}
		for _, c := range r.Run(file).Cases {
			for _, fl := range c.Failures {
				if fl.Rule == "" || fl.Expectation == "" {
					t.Errorf("failure without a rule or an expectation: %+v", fl)
				}
			}
		}
	})
}
