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
	for i := range fs {
		b = appendBinaryFields(b, &fs[i])
	}
	return b, nil
}

// appendBinaryFields appends the fields of r in the binary form of
// InsertFindings entries and of stored records (see
// insertFindingsBinaryVersion).
func appendBinaryFields(b []byte, r *findingRecord) []byte {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
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
	return b
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
	fr := fieldReader{raw: raw, all: string(raw), pos: k}
	p := &insertFindingsPayload{Findings: make([]findingRecord, n)}
	for i := range p.Findings {
		if err := fr.read(&p.Findings[i]); err != nil {
			return nil, fmt.Errorf("finding %d: %w", i, err)
		}
	}
	if fr.pos != len(raw) {
		return nil, fmt.Errorf("%w: %d bytes after the last finding", errBinaryEntry, len(raw)-fr.pos)
	}
	return p, nil
}

// fieldReader reads findings in the binary form of appendBinaryFields
// from raw, from pos on; all is raw as a string, of which the fields are
// substrings. It accepts exactly what appendBinaryFields writes of valid
// UTF-8 strings.
type fieldReader struct {
	raw []byte
	all string
	pos int
	err error
}

// str reads a string field.
func (fr *fieldReader) str() string {
	if fr.err != nil {
		return ""
	}
	raw, pos := fr.raw, fr.pos
	l, k := binary.Uvarint(raw[pos:])
	if k <= 0 || k != uvarintLen(l) || l > uint64(len(raw)-pos-k) {
		fr.err = fmt.Errorf("%w: string at byte %d", errBinaryEntry, pos)
		return ""
	}
	s := fr.all[pos+k : pos+k+int(l)]
	fr.pos += k + int(l)
	if !utf8.ValidString(s) {
		fr.err = fmt.Errorf("%w: invalid UTF-8 at byte %d", errBinaryEntry, fr.pos)
	}
	return s
}

// num reads an integer field.
func (fr *fieldReader) num() int64 {
	if fr.err != nil {
		return 0
	}
	v, k := binary.Varint(fr.raw[fr.pos:])
	if k <= 0 || k != varintLen(v) {
		fr.err = fmt.Errorf("%w: integer at byte %d", errBinaryEntry, fr.pos)
		return 0
	}
	fr.pos += k
	return v
}

// read reads one finding's fields into r.
func (fr *fieldReader) read(r *findingRecord) error {
	r.UID = fr.str()
	r.Tenant = fr.str()
	r.DiscoveredMS = fr.num()
	// Wrapping arithmetic, as in appendBinaryFields: every UpdatedMS has
	// exactly one difference.
	r.UpdatedMS = r.DiscoveredMS + fr.num()
	r.MonitoredDomainID = fr.num()
	r.ToolCode = fr.str()
	r.ResourceURL = fr.str()
	r.Username = fr.str()
	r.Password = fr.str()
	r.Hash = fr.str()
	r.HashAlgorithm = fr.str()
	r.State = fr.str()
	r.Ticket = fr.str()
	r.Priority = fr.str()
	r.Severity = fr.str()
	return fr.err
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
