package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// insertFindingsBinaryVersion is the payload version of InsertFindings
// entries in their compact binary form (docs/decisions.md decision 39).
// Version 1 (payloadVersion, JSON) is still read, and still written when a
// finding holds a string that is not valid UTF-8, which JSON would change.
//
// The payload after the type and version bytes is the number of findings
// (uvarint, at least 1), then each finding's fields in findingRecord's
// order: strings as a uvarint length and the bytes, integers as varints
// (zig-zag), and UpdatedMS as its difference from DiscoveredMS (wrapping;
// 0, one byte, for a new finding). Nothing may follow the last finding.
const insertFindingsBinaryVersion = 2

// minBinaryFinding is the fewest bytes one finding takes in the binary
// form: one byte per field.
const minBinaryFinding = 15

// appendEntry returns the log entry of c: the binary form when every
// string of every finding is valid UTF-8, else JSON (version 1).
func (c InsertFindings) appendEntry() ([]byte, error) {
	p, err := c.payload()
	if err != nil {
		return nil, err
	}
	fs := p.(insertFindingsPayload).Findings
	size := 2 + binary.MaxVarintLen64
	for i := range fs {
		r := &fs[i]
		if !validRecordText(r) {
			return appendEntry(typeInsertFindings, p)
		}
		size += 3*binary.MaxVarintLen64 + 12*binary.MaxVarintLen16 + len(r.UID) + len(r.Tenant) + len(r.ToolCode) +
			len(r.ResourceURL) + len(r.Username) + len(r.Password) + len(r.Hash) + len(r.HashAlgorithm) +
			len(r.State) + len(r.Ticket) + len(r.Priority) + len(r.Severity)
	}
	b := make([]byte, 0, size)
	b = append(b, byte(typeInsertFindings), insertFindingsBinaryVersion)
	b = binary.AppendUvarint(b, uint64(len(fs)))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for i := range fs {
		r := &fs[i]
		str(r.UID)
		str(r.Tenant)
		b = binary.AppendVarint(b, r.DiscoveredMS)
		b = binary.AppendVarint(b, r.UpdatedMS-r.DiscoveredMS)
		b = binary.AppendVarint(b, r.MonitoredDomainID)
		str(r.ToolCode)
		str(r.ResourceURL)
		str(r.Username)
		str(r.Password)
		str(r.Hash)
		str(r.HashAlgorithm)
		str(r.State)
		str(r.Ticket)
		str(r.Priority)
		str(r.Severity)
	}
	return b, nil
}

// validRecordText reports whether every string of r is valid UTF-8, so
// that a JSON round trip (the version 1 entry) would not change it.
func validRecordText(r *findingRecord) bool {
	for _, s := range [...]string{r.UID, r.Tenant, r.ToolCode, r.ResourceURL, r.Username, r.Password, r.Hash,
		r.HashAlgorithm, r.State, r.Ticket, r.Priority, r.Severity} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// errBinaryEntry is why a binary InsertFindings payload does not decode.
var errBinaryEntry = errors.New("malformed binary insert findings payload")

// decodeInsertFindingsBinary decodes the payload of a version 2
// InsertFindings entry (after the type and version bytes). It accepts
// exactly what appendEntry writes: invalid UTF-8, an integer not in its
// shortest form and trailing bytes are refused, so every node reads an entry alike. The strings
// share one allocation.
func decodeInsertFindingsBinary(raw []byte) (*insertFindingsPayload, error) {
	n, k := binary.Uvarint(raw)
	if k <= 0 || n == 0 || n > uint64(len(raw)-k)/minBinaryFinding || k != uvarintLen(n) {
		return nil, fmt.Errorf("%w: finding count", errBinaryEntry)
	}
	// One string holds every field's bytes: the fields are substrings.
	all := string(raw)
	pos := k
	var err error
	str := func() string {
		if err != nil {
			return ""
		}
		l, k := binary.Uvarint(raw[pos:])
		if k <= 0 || k != uvarintLen(l) || l > uint64(len(raw)-pos-k) {
			err = fmt.Errorf("%w: string at byte %d", errBinaryEntry, pos)
			return ""
		}
		s := all[pos+k : pos+k+int(l)]
		pos += k + int(l)
		if !utf8.ValidString(s) {
			err = fmt.Errorf("%w: invalid UTF-8 at byte %d", errBinaryEntry, pos)
		}
		return s
	}
	num := func() int64 {
		if err != nil {
			return 0
		}
		v, k := binary.Varint(raw[pos:])
		if k <= 0 || k != varintLen(v) {
			err = fmt.Errorf("%w: integer at byte %d", errBinaryEntry, pos)
			return 0
		}
		pos += k
		return v
	}
	p := &insertFindingsPayload{Findings: make([]findingRecord, n)}
	for i := range p.Findings {
		r := &p.Findings[i]
		r.UID = str()
		r.Tenant = str()
		r.DiscoveredMS = num()
		// Wrapping arithmetic, as in appendEntry: every UpdatedMS has
		// exactly one difference.
		r.UpdatedMS = r.DiscoveredMS + num()
		r.MonitoredDomainID = num()
		r.ToolCode = str()
		r.ResourceURL = str()
		r.Username = str()
		r.Password = str()
		r.Hash = str()
		r.HashAlgorithm = str()
		r.State = str()
		r.Ticket = str()
		r.Priority = str()
		r.Severity = str()
		if err != nil {
			return nil, fmt.Errorf("finding %d: %w", i, err)
		}
	}
	if pos != len(raw) {
		return nil, fmt.Errorf("%w: %d bytes after the last finding", errBinaryEntry, len(raw)-pos)
	}
	return p, nil
}

// uvarintLen is the length of v's shortest uvarint.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// varintLen is the length of v's shortest varint.
func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}
