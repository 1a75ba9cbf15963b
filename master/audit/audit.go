// Package audit holds the records of the masters' audit log and checks
// their hash chain (docs/decisions.md decision 61).
//
// Every change of the replicated state that reaches the raft log from
// feature level 4 on records one Record, written by the state machine on
// every master alike. Each record carries the SHA-256 of its own content
// (Hash) and the Hash of the record before it (Prev): altering, removing
// or inserting a record breaks the chain at that record, which Verify
// names. The package is pure: the store writes records, the API serves
// them, and `squall audit verify` checks them, all with this code.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Results of a record.
const (
	// ResultApplied is the result of a change the state machine applied.
	ResultApplied = "applied"
	// ResultRefused is the result of a command the state machine refused
	// (Code says why): it changed nothing else.
	ResultRefused = "refused"
)

// Record is one entry of the audit log.
type Record struct {
	// Seq grows by one with each record, never reused.
	Seq uint64 `json:"seq"`
	// TimeMS is Unix milliseconds by the clock of the leader that wrote
	// the entry.
	TimeMS int64 `json:"time_ms"`
	// Index is the raft log index of the entry that made the change.
	Index uint64 `json:"index"`
	// User is the token's user of the request ("" for the cluster's own
	// entries: members registering, removals).
	User string `json:"user,omitempty"`
	// Authorization is the name of the token's authorization the request
	// acted under, when it named one.
	Authorization string `json:"authorization,omitempty"`
	// Action is what was done, e.g. "draft.edit" (see docs/api.md).
	Action string `json:"action"`
	// Target names what it was done to: a draft id, a version, a
	// finding (tenant/uid), a member id.
	Target string `json:"target,omitempty"`
	// Detail adds what the action alone does not say: the kind of a
	// draft edit and its node path, the version a deploy made.
	Detail string `json:"detail,omitempty"`
	// RequestID is the request's id (X-Squall-Request-Id or its
	// Idempotency-Key).
	RequestID string `json:"request_id,omitempty"`
	// Result is ResultApplied or ResultRefused; Code is a refusal's code.
	Result string `json:"result"`
	Code   string `json:"code,omitempty"`
	// Prev is the Hash of the record before (of Seq-1), also when that
	// record was pruned; "" for the first record ever.
	Prev string `json:"prev"`
	// Hash is the hex SHA-256 of the record's JSON with Hash empty.
	Hash string `json:"hash"`
}

// Sum returns the hash of r: the hex SHA-256 of its JSON (encoding/json,
// fields in their declared order) with Hash empty.
func Sum(r Record) string {
	r.Hash = ""
	b, err := json.Marshal(r)
	if err != nil {
		// A struct of strings and integers always encodes.
		panic(fmt.Sprintf("audit: encode record: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Seal sets r's Hash.
func Seal(r Record) Record {
	r.Hash = Sum(r)
	return r
}

// BrokenError names the first record at which a chain does not verify.
type BrokenError struct {
	// Seq is the record's sequence number.
	Seq uint64
	// Reason says what does not match.
	Reason string
}

// Error names the record and the reason.
func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at record %d: %s", e.Seq, e.Reason)
}

// Verify checks a chain of records, oldest first: each record's hash is
// that of its content, sequence numbers follow each other, and each
// record's Prev is the hash of the one before. The first record's Prev is
// taken as it is (the records before it were pruned). The error is a
// *BrokenError naming the first record that does not verify.
func Verify(recs []Record) error {
	for i, r := range recs {
		if got := Sum(r); got != r.Hash {
			return &BrokenError{Seq: r.Seq, Reason: fmt.Sprintf("its content hashes to %s, the record says %s (the record was altered)", short(got), short(r.Hash))}
		}
		if i == 0 {
			continue
		}
		p := recs[i-1]
		if r.Seq != p.Seq+1 {
			return &BrokenError{Seq: r.Seq, Reason: fmt.Sprintf("it follows record %d (records %d to %d are missing)", p.Seq, p.Seq+1, r.Seq-1)}
		}
		if r.Prev != p.Hash {
			return &BrokenError{Seq: r.Seq, Reason: fmt.Sprintf("its previous hash %s is not the hash %s of record %d (a record was replaced)", short(r.Prev), short(p.Hash), p.Seq)}
		}
	}
	return nil
}

// short returns the first 16 characters of a hash.
func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
