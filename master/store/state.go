package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
)

// Draft is the one draft: a working copy of the tree that one user owns.
type Draft struct {
	ID    string
	Owner string
	// CreatedMS and UpdatedMS are Unix milliseconds, chosen by the node
	// that submitted the command.
	CreatedMS int64
	UpdatedMS int64
	Tree      *config.Node
	// Displaced lists the users a takeover of this draft displaced and
	// that have not taken it over again since (decision 8): none of its
	// requests on this draft is served, reads included. Never modified in
	// place: a takeover builds a new list.
	Displaced []string
	// Tests are the draft's test files, sorted by name (none below
	// LevelDraftTests; see drafttests.go). Never modified in place.
	Tests []TestFile
}

// Clone returns a deep copy of the draft.
func (d *Draft) Clone() *Draft {
	if d == nil {
		return nil
	}
	c := *d
	c.Tree = d.Tree.Clone()
	c.Displaced = slices.Clone(d.Displaced)
	c.Tests = slices.Clone(d.Tests)
	return &c
}

// state is the decoded replicated state. A state value is never modified
// in place once it is shared: apply builds the next one, and its trees and
// draft are never mutated, only replaced.
type state struct {
	// applied is the index of the last log entry in the state file.
	applied uint64
	// index is the raft log index of the last command that changed the state.
	index uint64

	active      *config.Node
	activeJSON  json.RawMessage // export file of active
	activeIndex uint64          // log index of the last change of the active tree

	draft *Draft
	// draftJSON is the export file of the draft's tree as stored whole;
	// draftEdits edits (bucketDraftEdits) were applied to it since.
	draftJSON  json.RawMessage
	draftEdits int
	// draftSize is the draft tree's size (config.TreeSize), kept up to
	// date by each edit.
	draftSize int

	// members maps member ids to their HTTP addresses. Like the trees it
	// is never modified in place: a change installs a new map.
	members map[string]string
	// levels holds the feature levels the members advertised.
	levels *levelMap

	// versions are the recorded versions of the active tree, oldest
	// first (never modified in place: a change installs a new slice);
	// nextVersion is the number of the next one (0: none recorded yet).
	versions    []Version
	nextVersion uint64

	// ids is set once the state assigns ids to tools and tenants (the ids
	// bucket exists; see ids.go).
	ids bool

	// activeTests are the tests the active tree was deployed with (see
	// drafttests.go); never modified in place.
	activeTests []TestFile

	// auditNext is the sequence number of the next audit record (0 or
	// 1: none recorded yet).
	auditNext uint64
}

// The state file: one bucket, a few keys.
var (
	bucketState = []byte("state")

	keyFormat      = []byte("format")       // decimal stateFormat
	keyApplied     = []byte("applied")      // uint64 big-endian
	keyIndex       = []byte("index")        // uint64 big-endian
	keyActive      = []byte("active")       // export file JSON
	keyActiveIndex = []byte("active_index") // uint64 big-endian
	keyDraft       = []byte("draft")        // draftRecord JSON
	keyMembers     = []byte("members")      // JSON object: member id -> HTTP address
	// JSON object: member id -> feature level (absent: 0). Binaries
	// without levels never read it.
	keyMemberLevels = []byte("member_levels")
)

// stateFormat is the version of the state file layout. Snapshots are state
// files, so a node refuses to restore a snapshot of a newer format.
// Format 5 stores findings in a binary form (see appendRecord), and still
// reads the JSON of earlier formats; a file becomes format 5 when a
// finding is stored or patched.
// Format 4 adds the draft_edits bucket (see draftedit.go); a file becomes
// format 4 when a draft edit is stored.
// Format 2 adds the findings buckets (see finding.go); a format 1 file
// becomes format 2 when its first finding is stored. Format 3 replaces
// the tenants' dedupe buckets, which it still reads, with the
// finding_keys bucket; a file becomes format 3 when a finding is stored.
// Format 6 adds the versions (see version.go); a file becomes format 6
// when a version is stored. New files start at format 5, which masters
// before versions read.
//
// Format 7 adds the audit log (see audit.go); a file becomes format 7
// when the first record is stored.
//
// Format 8 adds the tests of the draft, of the active tree and of the
// versions (see drafttests.go); a file becomes format 8 when tests are
// first stored.
//
// Format 9 adds the ids of tools and tenants (see ids.go); a file becomes
// format 9 when the AssignIDs entry is applied.
//
// Format 10 adds the kept backtests (see backtest.go); a file becomes
// format 10 when the first one is kept.
const stateFormat = formatBacktests

// formatRecords is the format of new state files and of files that hold
// findings in binary records.
const formatRecords = 5

// raiseFormat marks the state file as written in format n unless it is
// already of a later one.
func raiseFormat(tx *bolt.Tx, n int) error {
	b := tx.Bucket(bucketState)
	if cur, err := strconv.Atoi(string(b.Get(keyFormat))); err == nil && cur >= n {
		return nil
	}
	return b.Put(keyFormat, []byte(strconv.Itoa(n)))
}

// draftRecord is the stored form of the draft.
type draftRecord struct {
	ID        string          `json:"id"`
	Owner     string          `json:"owner"`
	CreatedMS int64           `json:"created_ms"`
	UpdatedMS int64           `json:"updated_ms"`
	Tree      json.RawMessage `json:"tree"`
	// Displaced is Draft.Displaced, absent when empty (the draft records
	// of masters before feature level 2, which ignore the field).
	Displaced []string `json:"displaced,omitempty"`
}

func putUint64(b *bolt.Bucket, key []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.Put(key, buf[:])
}

func getUint64(b *bolt.Bucket, key []byte) (uint64, error) {
	v := b.Get(key)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("key %s: %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// initState creates the bucket and format key of an empty state file, and
// checks the format of an existing one.
func initState(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketState)
		if err != nil {
			return err
		}
		if b.Get(keyFormat) == nil {
			return b.Put(keyFormat, []byte(strconv.Itoa(formatRecords)))
		}
		return checkFormat(b)
	})
}

func checkFormat(b *bolt.Bucket) error {
	v := b.Get(keyFormat)
	if v == nil {
		return errors.New("state file has no format key")
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > stateFormat {
		return fmt.Errorf("state file format %q is not supported (this binary reads 1 to %d)", v, stateFormat)
	}
	return nil
}

// readState decodes the state file.
func readState(db *bolt.DB) (state, error) {
	var st state
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketState)
		if b == nil {
			return errors.New("state file has no state bucket")
		}
		if err := checkFormat(b); err != nil {
			return err
		}
		var err error
		if st.applied, err = getUint64(b, keyApplied); err != nil {
			return err
		}
		if st.index, err = getUint64(b, keyIndex); err != nil {
			return err
		}
		if st.activeIndex, err = getUint64(b, keyActiveIndex); err != nil {
			return err
		}
		if v := b.Get(keyActive); v != nil {
			st.activeJSON = append(json.RawMessage(nil), v...)
			ex, err := config.DecodeExport(st.activeJSON)
			if err != nil {
				return fmt.Errorf("active tree: %w", err)
			}
			st.active = ex.Node
		}
		if v := b.Get(keyDraft); v != nil {
			var rec draftRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("draft: %w", err)
			}
			ex, err := config.DecodeExport(rec.Tree)
			if err != nil {
				return fmt.Errorf("draft tree: %w", err)
			}
			st.draft = &Draft{ID: rec.ID, Owner: rec.Owner, CreatedMS: rec.CreatedMS, UpdatedMS: rec.UpdatedMS, Tree: ex.Node, Displaced: rec.Displaced}
			st.draftJSON, st.draftSize = rec.Tree, len(rec.Tree)
			if err := replayDraftEdits(tx, &st); err != nil {
				return err
			}
			if st.draft.Tests, err = readTests(b, keyDraftTests); err != nil {
				return err
			}
		}
		if st.activeTests, err = readTests(b, keyActiveTests); err != nil {
			return err
		}
		if v := b.Get(keyMembers); v != nil {
			if err := json.Unmarshal(v, &st.members); err != nil {
				return fmt.Errorf("members: %w", err)
			}
		}
		if v := b.Get(keyMemberLevels); v != nil {
			l := &levelMap{}
			if err := json.Unmarshal(v, &l.m); err != nil {
				return fmt.Errorf("member levels: %w", err)
			}
			st.levels = l
		}
		if st.auditNext, err = getUint64(b, keyAuditNext); err != nil {
			return err
		}
		st.ids = tx.Bucket(bucketIDs) != nil
		return readVersions(tx, &st)
	})
	if err != nil {
		return state{}, err
	}
	if st.active == nil {
		// The implicit initial tree: the root filter alone.
		st.active = config.NewRoot()
		raw, err := encodeTree(st.active)
		if err != nil {
			return state{}, err
		}
		st.activeJSON = raw
	}
	return st, nil
}

// putMembers stores the member map.
func putMembers(b *bolt.Bucket, m map[string]string) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.Put(keyMembers, v)
}

// putLevels stores the member levels.
func putLevels(b *bolt.Bucket, l *levelMap) error {
	v, err := json.Marshal(l.mapOrNil())
	if err != nil {
		return err
	}
	return b.Put(keyMemberLevels, v)
}

// putDraft stores d with tree as its export file.
func putDraft(b *bolt.Bucket, d *Draft, tree json.RawMessage) error {
	v, err := json.Marshal(draftRecord{ID: d.ID, Owner: d.Owner, CreatedMS: d.CreatedMS, UpdatedMS: d.UpdatedMS, Tree: tree, Displaced: d.Displaced})
	if err != nil {
		return err
	}
	return b.Put(keyDraft, v)
}
