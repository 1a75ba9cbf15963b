package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// recordForms returns the stored forms of r: binary (appendRecord, for
// valid UTF-8) and JSON.
func recordForms(t *testing.T, r *findingRecord) (bin, js []byte) {
	t.Helper()
	bin, err := appendRecord(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	if js, err = appendJSONRecord(nil, r); err != nil {
		t.Fatal(err)
	}
	return bin, js
}

func TestFindingRecord_Forms(t *testing.T) {
	t.Parallel()
	a := findingRecord(testFinding("a", 1, 5))
	a.Ticket, a.Priority, a.Severity, a.UpdatedMS = "T-1", "High", "Low", 9
	c := findingRecord(testFinding("c", 3, 7))
	c.DiscoveredMS, c.UpdatedMS, c.MonitoredDomainID = 0, math.MinInt64, math.MaxInt64
	c.Username = "ü\u2028\"\\<&>\x00"
	for _, r := range []findingRecord{a, c} {
		bin, js := recordForms(t, &r)
		if bin[0] != recordBinary || len(bin) >= len(js) {
			t.Fatalf("binary record %q (%d bytes, JSON %d)", bin, len(bin), len(js))
		}
		var fromBin, fromJSON findingRecord
		if err := decodeRecord(bin, &fromBin); err != nil {
			t.Fatal(err)
		}
		if err := decodeRecord(js, &fromJSON); err != nil {
			t.Fatal(err)
		}
		if fromBin != r || fromJSON != r {
			t.Fatalf("binary read %+v, JSON %+v, want %+v", fromBin, fromJSON, r)
		}
		// The backup's form of both is the JSON record.
		for _, v := range [][]byte{bin, js} {
			if got, err := appendRecordJSON(nil, v); err != nil || !bytes.Equal(got, js) {
				t.Fatalf("backup form %q, %v; want %q", got, err, js)
			}
		}
		// Every truncation, and a trailing byte, is refused.
		for i := range len(bin) {
			if err := decodeRecord(bin[:i], new(findingRecord)); err == nil {
				t.Fatalf("truncated at %d: decoded", i)
			}
		}
		if err := decodeRecord(append(bytes.Clone(bin), 0), new(findingRecord)); !errors.Is(err, errRecord) {
			t.Fatalf("trailing byte: %v", err)
		}
	}
	// A string that is not valid UTF-8 is stored as JSON, as before.
	bad := a
	bad.Password = "\xff"
	v, err := appendRecord(nil, &bad)
	if err != nil || v[0] != '{' {
		t.Fatalf("record with invalid UTF-8: %q, %v", v, err)
	}
}

// FuzzDecodeRecord checks the binary stored finding against the JSON
// one: any finding with valid UTF-8 strings reads back alike from both;
// on arbitrary bytes the binary decoder never panics, and whatever it
// accepts encodes back to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add("u1", "tenant", int64(5), int64(2), int64(7), "tool", "https://example.com/a/", "user@example.com", "pw", "", "Unassigned", "t-1", []byte{recordBinary})
	f.Add("ü\u2028\"\\", "t\x00", int64(-1), int64(1<<62), int64(math.MinInt64), "<&>", "\xff\xfe", "\U0001F600", "", "h", "s", "", []byte{recordBinary, 0x80})
	f.Fuzz(func(t *testing.T, uid, tenant string, ms, updated, domain int64, tool, resource, username, password, hash, state, ticket string, raw []byte) {
		v := strings.ToValidUTF8
		in := findingRecord{
			UID: v(uid, "?"), Tenant: v(tenant, "?"), DiscoveredMS: ms, UpdatedMS: updated, MonitoredDomainID: domain,
			ToolCode: v(tool, "?"), ResourceURL: v(resource, "?"), Username: v(username, "?"), Password: v(password, "?"),
			Hash: v(hash, "?"), State: v(state, "?"), Ticket: v(ticket, "?"),
		}
		bin, js := recordForms(t, &in)
		var fromBin, fromJSON findingRecord
		if err := decodeRecord(bin, &fromBin); err != nil {
			t.Fatalf("binary record does not decode: %v", err)
		}
		if err := json.Unmarshal(js, &fromJSON); err != nil {
			t.Fatal(err)
		}
		if fromBin != in || fromJSON != in {
			t.Fatalf("binary read %+v, JSON %+v, want %+v", fromBin, fromJSON, in)
		}

		var r findingRecord
		if err := decodeRecord(raw, &r); err != nil || len(raw) == 0 || raw[0] != recordBinary {
			return
		}
		if back := appendBinaryFields([]byte{recordBinary}, &r); !bytes.Equal(back, raw) {
			t.Fatalf("%x decodes and encodes to %x", raw, back)
		}
	})
}

// TestFSM_FindingsFormat4 opens a state file written in format 4, whose
// findings are stored as JSON: it reads, pages, patches, deduplicates
// and backs them up as before; new and patched findings are stored in the
// binary form, beside the JSON ones, and the file becomes format 5.
func TestFSM_FindingsFormat4(t *testing.T) {
	f := newTestFSM(t)
	a0, a1, b0 := testFinding("a", 0, 1000), testFinding("a", 1, 2000), testFinding("b", 0, 1000)
	a1.Password, a1.Hash = "secret", ""
	fsmInsert(t, f, 1, a0, a1, b0)
	// Rewrite the file as format 4 wrote it: JSON records.
	if err := f.db.Update(func(tx *bolt.Tx) error {
		for _, tenant := range []string{"a", "b"} {
			tb, _, err := tenantFindings(tx, tenant, false)
			if err != nil {
				return err
			}
			recs := map[string][]byte{}
			if err := tb.byUID.ForEach(func(k, v []byte) error {
				if v[0] != recordBinary {
					return fmt.Errorf("record %s is not binary: %q", k, v)
				}
				var r findingRecord
				if err := decodeRecord(v, &r); err != nil {
					return err
				}
				js, err := appendJSONRecord(nil, &r)
				recs[string(k)] = js
				return err
			}); err != nil {
				return err
			}
			for k, v := range recs {
				if err := tb.byUID.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketState).Put(keyFormat, []byte("4"))
	}); err != nil {
		t.Fatal(err)
	}
	backup := func(f *fsm) string {
		t.Helper()
		var out []string
		if err := f.view(func(tx *bolt.Tx) error {
			for _, tenant := range []string{"a", "b"} {
				tb, _, err := tenantFindings(tx, tenant, false)
				if err != nil {
					return err
				}
				if err := tb.byUID.ForEach(func(_, v []byte) error {
					js, err := appendRecordJSON(nil, v)
					out = append(out, string(js))
					return err
				}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n")
	}
	before := backup(f)
	g := reopenFSM(t, f)
	if format := stateFormatOf(t, g); format != "4" {
		t.Fatalf("format %q after opening", format)
	}
	if got := backup(g); got != before {
		t.Fatalf("backup form after reopening:\n%s\nwant\n%s", got, before)
	}
	for _, want := range []Finding{a0, a1, b0} {
		if got, err := g.finding(want.Tenant, want.UID); err != nil || got != want {
			t.Fatalf("finding %s: %+v, %v", want.UID, got, err)
		}
	}
	// The old findings deduplicate; a new one is stored in binary.
	dup := a1
	dup.UID = "a-again"
	a2 := testFinding("a", 2, 3000)
	outs := fsmInsert(t, g, 2, dup, a2)
	if outs[0].Created || outs[0].UID != a1.UID || !outs[1].Created {
		t.Fatalf("outcomes %+v", outs)
	}
	if format := stateFormatOf(t, g); format != strconv.Itoa(formatRecords) {
		t.Fatalf("format %q after an insert", format)
	}
	// A patch of a JSON record stores it in binary.
	if r := fsmApply(t, g, 3, PatchFinding{Tenant: "a", UID: a0.UID, State: new("Resolved"), Now: time.UnixMilli(5000)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	a0.State, a0.UpdatedMS = "Resolved", 5000
	forms := map[string]byte{}
	if err := g.view(func(tx *bolt.Tx) error {
		tb, _, err := tenantFindings(tx, "a", false)
		if err != nil {
			return err
		}
		return tb.byUID.ForEach(func(k, v []byte) error {
			forms[string(k)] = v[0]
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]byte{a0.UID: recordBinary, a1.UID: '{', a2.UID: recordBinary}; !reflect.DeepEqual(forms, want) {
		t.Fatalf("record forms %q, want %q", forms, want)
	}
	p, err := g.findings("a", FindingQuery{Limit: 10})
	if err != nil || !reflect.DeepEqual(p.Findings, []Finding{a2, a1, a0}) || p.Total != 3 {
		t.Fatalf("page %+v, %v", p, err)
	}
	p, err = g.findings("a", FindingQuery{State: "Resolved", Limit: 10})
	if err != nil || !reflect.DeepEqual(p.Findings, []Finding{a0}) {
		t.Fatalf("filtered page %+v, %v", p, err)
	}
	// A snapshot of the mixed file restores alike.
	h := newTestFSM(t)
	if err := h.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, g)))); err != nil {
		t.Fatal(err)
	}
	if backup(h) != backup(g) {
		t.Fatalf("restored backup form differs")
	}
}
