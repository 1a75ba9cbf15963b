package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// A stored finding (a by_uid value) is in one of two forms
// (docs/decisions.md decision 49):
//
//   - JSON of findingRecord (state file formats 2 to 4, still read, and
//     still written for a record holding a string that is not valid
//     UTF-8): it begins with '{';
//   - binary (format 5): the byte recordBinary, then the finding's fields
//     as in a binary InsertFindings entry (appendBinaryFields). Nothing
//     follows them.
//
// Both decode to the same finding: a stored finding's strings are valid
// UTF-8 (JSON entries decode to valid UTF-8, binary entries and patches
// are refused otherwise), which JSON keeps as it is.
const recordBinary = 0x01

// appendRecord appends the stored form of r to dst: binary when every
// string of r is valid UTF-8, else JSON (which changes invalid UTF-8, as
// it always did).
func appendRecord(dst []byte, r *findingRecord) ([]byte, error) {
	if !validRecordText(r) {
		return appendJSONRecord(dst, r)
	}
	return appendBinaryFields(append(dst, recordBinary), r), nil
}

// errRecord is why a stored finding does not decode.
var errRecord = errors.New("malformed stored finding")

// decodeRecord decodes a stored finding of either form into r. The
// strings of r do not point into v (which bolt owns).
func decodeRecord(v []byte, r *findingRecord) error {
	if len(v) == 0 {
		return fmt.Errorf("%w: empty", errRecord)
	}
	if v[0] != recordBinary {
		return json.Unmarshal(v, r)
	}
	fr := fieldReader{raw: v, all: string(v), pos: 1}
	if err := fr.read(r); err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	if fr.pos != len(v) {
		return fmt.Errorf("%w: %d bytes after the fields", errRecord, len(v)-fr.pos)
	}
	return nil
}

// appendRecordJSON appends the JSON form of stored finding v to dst (the
// backup's form of a finding): v itself when it is JSON.
func appendRecordJSON(dst, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != recordBinary {
		return append(dst, v...), nil
	}
	var r findingRecord
	if err := decodeRecord(v, &r); err != nil {
		return nil, err
	}
	return appendJSONRecord(dst, &r)
}
