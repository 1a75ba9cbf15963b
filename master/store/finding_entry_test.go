package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestInsertFindingsEntry_Binary(t *testing.T) {
	t.Parallel()
	a := testFinding("a", 1, 5)
	b := testFinding("b", 2, 6)
	b.Ticket, b.Priority, b.Severity, b.UpdatedMS = "T-1", "High", "Low", 9
	c := testFinding("c", 3, 7)
	c.DiscoveredMS, c.UpdatedMS, c.MonitoredDomainID = 0, math.MinInt64, math.MaxInt64
	c.Username = "ü\u2028\"\\<&>\x00"
	cmd := InsertFindings{Findings: []Finding{a, b, c}}
	data, err := encodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != byte(typeInsertFindings) || data[1] != insertFindingsBinaryVersion {
		t.Fatalf("entry starts %x, want the binary version", data[:2])
	}
	p, err := cmd.payload()
	if err != nil {
		t.Fatal(err)
	}
	v1, err := appendEntry(typeInsertFindings, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= len(v1) {
		t.Errorf("binary entry %d bytes, JSON %d", len(data), len(v1))
	}
	got, err := decodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	old, err := decodeCommand(v1)
	if err != nil {
		t.Fatal(err)
	}
	want := &insertFindingsPayload{Findings: []findingRecord{findingRecord(a), findingRecord(b), findingRecord(c)}}
	if !reflect.DeepEqual(got.p, want) || !reflect.DeepEqual(old.p, want) {
		t.Fatalf("binary decoded %#v, JSON %#v, want %#v", got.p, old.p, want)
	}

	// Invalid UTF-8 would be changed by JSON: such entries are written
	// as version 1, which older binaries read alike.
	bad := a
	bad.Password = "\xff"
	data, err = encodeCommand(InsertFindings{Findings: []Finding{a, bad}})
	if err != nil {
		t.Fatal(err)
	}
	if data[1] != payloadVersion {
		t.Fatalf("entry with invalid UTF-8 has version %d", data[1])
	}

	// Every truncation, and any trailing byte, is refused.
	data, err = encodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i < len(data); i++ {
		if _, err := decodeCommand(data[:i]); !errors.Is(err, errCorruptEntry) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if _, err := decodeCommand(append(bytes.Clone(data), 0)); !errors.Is(err, errCorruptEntry) {
		t.Fatalf("trailing byte: %v", err)
	}
	// A count of 0, and a non-shortest count.
	for _, raw := range [][]byte{{0}, {0x83, 0x00}} {
		if _, err := decodeCommand(append([]byte{byte(typeInsertFindings), insertFindingsBinaryVersion}, raw...)); !errors.Is(err, errCorruptEntry) {
			t.Fatalf("payload %x: %v", raw, err)
		}
	}
}

// FuzzDecodeInsertFindingsBinary checks that the binary InsertFindings
// decoder accepts only what the encoder writes (so that no two nodes or
// versions can read an entry differently): whatever it accepts encodes
// back to the same bytes; and that its result is the JSON entry's.
func FuzzDecodeInsertFindingsBinary(f *testing.F) {
	for _, c := range []InsertFindings{
		{Findings: []Finding{testFinding("a", 1, 5)}},
		{Findings: []Finding{testFinding("a", 1, 5), testFinding("b", 2, 6)}},
	} {
		data, err := encodeCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data[2:])
	}
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{0x81, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := decodeInsertFindingsBinary(raw)
		if err != nil {
			if !errors.Is(err, errBinaryEntry) {
				t.Fatalf("error %v is not an errBinaryEntry", err)
			}
			return
		}
		cmd := InsertFindings{}
		for _, r := range p.Findings {
			cmd.Findings = append(cmd.Findings, Finding(r))
		}
		// Findings the store refuses (checkFinding) are refused by the
		// encoder; the state machine refuses them alike when applying.
		p1, err := cmd.payload()
		if err != nil {
			return
		}
		data, err := cmd.appendEntry()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data[2:], raw) {
			t.Fatalf("%x decodes and encodes to %x", raw, data[2:])
		}
		v1, err := appendEntry(typeInsertFindings, p1)
		if err != nil {
			t.Fatal(err)
		}
		var want insertFindingsPayload
		if err := strictUnmarshal(v1[2:], &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, &want) {
			t.Fatalf("binary %#v, JSON %#v", p, &want)
		}
	})
}

// TestDedupeKey_Stable pins the dedupe key: state files hold it, so a
// change would make every stored finding's duplicate look new.
func TestDedupeKey_Stable(t *testing.T) {
	t.Parallel()
	// The computation of the versions that wrote the keys.
	reference := func(r *findingRecord) []byte {
		h := sha256.New()
		secret := "h:" + r.Hash
		if r.Hash == "" {
			secret = "p:" + r.Password
		}
		for _, s := range []string{r.Tenant, strconv.FormatInt(r.MonitoredDomainID, 10), r.ResourceURL, r.Username, secret} {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(s)))
			h.Write(n[:])
			h.Write([]byte(s))
		}
		return h.Sum(nil)
	}
	long := strings.Repeat("x", 1000)
	for _, r := range []findingRecord{
		{Tenant: "t", MonitoredDomainID: 3, ResourceURL: "https://h/", Username: "u", Hash: "abc"},
		{Tenant: "t", MonitoredDomainID: -1, ResourceURL: "https://h/", Username: "u", Password: "pw"},
		{Tenant: long, MonitoredDomainID: math.MaxInt64, ResourceURL: long, Username: long, Password: long},
		{},
	} {
		if got, want := appendDedupeKey(nil, &r), reference(&r); !bytes.Equal(got, want) {
			t.Fatalf("%+v: key %x, want %x", r, got, want)
		}
	}
}
