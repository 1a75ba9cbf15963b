package ruletest

import "testing"

// BenchmarkRunner_RunCase runs one case with every kind of expectation.
func BenchmarkRunner_RunCase(b *testing.B) {
	r := newTestRunner(b)
	f, err := Decode("b.json", []byte(oneCase(diskFull, `"match": ["root/alerts/disk/disk_full", "root/hosts/per_host/down"],
		"no_match": ["root/hosts[0]/per_host/down"],
		"variables": {"root/alerts/disk/disk_full": {"host": "db1"}},
		"actions": {"root/alerts/disk/disk_full": [{"id": "logger", "payload": {"level": "critical"}}]}`)))
	if err != nil {
		b.Fatal(err)
	}
	c := f.Cases[0]
	b.ReportAllocs()
	for b.Loop() {
		if res := r.RunCase(c); !res.Passed() {
			b.Fatal(res.Failures)
		}
	}
}
