package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeBackup feeds the backup decoder (it reads uploaded files)
// arbitrary input: it never panics, every refusal is ErrInvalidBackup or
// ErrInvalidTree, and a file it accepts writes back to one that decodes
// to the same backup.
func FuzzDecodeBackup(f *testing.F) {
	full := &Backup{Index: 7, ActiveIndex: 5, Active: treeWith("a", "b"),
		Draft:        &Draft{ID: "d1", Owner: "alice", CreatedMS: 1, UpdatedMS: 2, Tree: treeWith("c")},
		WithFindings: true, Findings: []Finding{testFinding("a", 1, 5), testFinding("b", 2, 6)}}
	for _, b := range []*Backup{full, {Active: treeWith()}} {
		data, err := json.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"format":1,"index":0,"active_index":0,"active":{"version":1,"node":{"type":"filter","name":"root"}},"draft":null}`))
	f.Add([]byte(`{"format":2,"findings":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBackup(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidBackup) && !errors.Is(err, ErrInvalidTree) {
				t.Fatalf("error %v is neither ErrInvalidBackup nor ErrInvalidTree", err)
			}
			return
		}
		again, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("accepted backup does not encode: %v", err)
		}
		b2, err := DecodeBackup(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("re-encoded backup does not decode: %v\n%s", err, again)
		}
		if b2.Index != b.Index || b2.ActiveIndex != b.ActiveIndex || !reflect.DeepEqual(b2.Draft != nil, b.Draft != nil) ||
			len(b2.Findings) != len(b.Findings) || (len(b.Findings) > 0 && !reflect.DeepEqual(b2.Findings, b.Findings)) {
			t.Fatalf("round trip changed the backup:\n%+v\n%+v", b, b2)
		}
	})
}

// TestCheckBackup reads files as a restore does without keeping them:
// the summary of a good one, ErrInvalidBackup for a cut one.
func TestCheckBackup(t *testing.T) {
	t.Parallel()
	b := &Backup{Index: 7, ActiveIndex: 5, Active: treeWith("a", "b"),
		Draft:        &Draft{ID: "d1", Owner: "alice", CreatedMS: 1, UpdatedMS: 2, Tree: treeWith("c")},
		WithFindings: true, Findings: []Finding{testFinding("a", 1, 5), testFinding("b", 2, 6)}}
	file, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := CheckBackup(bytes.NewReader(file))
	if err != nil || *sum != (BackupSummary{Format: BackupFormat, Index: 7, ActiveIndex: 5, Draft: true, Findings: 2}) {
		t.Fatalf("CheckBackup = %+v, %v", sum, err)
	}
	if _, err := CheckBackup(bytes.NewReader(file[:len(file)-10])); !errors.Is(err, ErrInvalidBackup) {
		t.Fatalf("a cut file: %v, want ErrInvalidBackup", err)
	}
}
