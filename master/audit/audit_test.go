package audit

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// chain returns n sealed records, the first with prev "anchor".
func chain(n int) []Record {
	var out []Record
	prev := "anchor"
	for i := range n {
		r := Seal(Record{Seq: uint64(10 + i), TimeMS: int64(i), User: "alice", Action: "draft.edit", Result: ResultApplied, Prev: prev})
		prev = r.Hash
		out = append(out, r)
	}
	return out
}

// TestVerify: an intact chain (its first prev taken as it is) verifies;
// an altered record, a resealed one, a missing one and a swapped pair are
// named by the first record that does not verify.
func TestVerify(t *testing.T) {
	t.Parallel()
	if err := Verify(chain(4)); err != nil {
		t.Fatal(err)
	}
	if err := Verify(nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func([]Record) []Record
		seq    uint64
		reason string
	}{
		{"altered", func(r []Record) []Record { r[1].User = "eve"; return r }, 11, "altered"},
		{"altered and resealed", func(r []Record) []Record { r[1].User = "eve"; r[1] = Seal(r[1]); return r }, 12, "replaced"},
		{"removed", func(r []Record) []Record { return slices.Delete(r, 1, 2) }, 12, "missing"},
		{"swapped", func(r []Record) []Record { r[1], r[2] = r[2], r[1]; return r }, 12, "follows record 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var be *BrokenError
			err := Verify(tc.change(chain(4)))
			if !errors.As(err, &be) || be.Seq != tc.seq || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("verify: %v, want broken at %d (%s)", err, tc.seq, tc.reason)
			}
		})
	}
}
