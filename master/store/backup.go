package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/squallhq/squall/config"
)

// BackupFormat is the version of the backup file written by
// [Backup.MarshalJSON]. DecodeBackup reads every format up to it.
const BackupFormat = 1

// Backup is a logical copy of the replicated state: the active tree and
// the draft. It is what an operator saves to restore later, into the same
// cluster or a new one ([Store.Restore]). Membership is deliberately not
// part of it: it belongs to the cluster, not to the data.
//
// Its JSON form, the backup file, is
//
//	{"format": 1, "index": N, "active_index": N,
//	 "active": <export file>,
//	 "draft": {"id", "owner", "created_ms", "updated_ms", "tree": <export file>} | null}
type Backup struct {
	// Index and ActiveIndex are the state's and the active tree's indexes
	// when the backup was taken (informational: a restore gets new ones).
	Index       uint64
	ActiveIndex uint64
	Active      *config.Node
	// Draft is nil when there was no draft.
	Draft *Draft
}

// backupFile is the JSON form of a Backup.
type backupFile struct {
	Format      int             `json:"format"`
	Index       uint64          `json:"index"`
	ActiveIndex uint64          `json:"active_index"`
	Active      json.RawMessage `json:"active"`
	Draft       *draftRecord    `json:"draft"`
}

// MarshalJSON writes the backup file.
func (b *Backup) MarshalJSON() ([]byte, error) {
	active, err := encodeTree(b.Active)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	f := backupFile{Format: BackupFormat, Index: b.Index, ActiveIndex: b.ActiveIndex, Active: active}
	if d := b.Draft; d != nil {
		tree, err := encodeTree(d.Tree)
		if err != nil {
			return nil, fmt.Errorf("backup: draft: %w", err)
		}
		f.Draft = &draftRecord{ID: d.ID, Owner: d.Owner, CreatedMS: d.CreatedMS, UpdatedMS: d.UpdatedMS, Tree: tree}
	}
	return json.Marshal(f)
}

// DecodeBackup reads a backup file, strictly: unknown fields, trailing
// data, a newer format and trees that do not pass config.Validate are
// errors (ErrInvalidTree for the trees).
func DecodeBackup(r io.Reader) (*Backup, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read backup: %w", err)
	}
	var f backupFile
	if err := strictUnmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode backup: %w", err)
	}
	if f.Format < 1 || f.Format > BackupFormat {
		return nil, fmt.Errorf("decode backup: format %d is not supported (this binary reads 1 to %d)", f.Format, BackupFormat)
	}
	if len(f.Active) == 0 || string(f.Active) == "null" {
		return nil, errors.New("decode backup: no active tree")
	}
	b := &Backup{Index: f.Index, ActiveIndex: f.ActiveIndex}
	if b.Active, err = decodeTree(f.Active); err != nil {
		return nil, fmt.Errorf("decode backup: active tree: %w", err)
	}
	if rec := f.Draft; rec != nil {
		if rec.ID == "" || rec.Owner == "" {
			return nil, fmt.Errorf("decode backup: %w: the draft needs an id and an owner", ErrInvalidCommand)
		}
		tree, err := decodeTree(rec.Tree)
		if err != nil {
			return nil, fmt.Errorf("decode backup: draft tree: %w", err)
		}
		b.Draft = &Draft{ID: rec.ID, Owner: rec.Owner, CreatedMS: rec.CreatedMS, UpdatedMS: rec.UpdatedMS, Tree: tree}
	}
	return b, nil
}

// Backup returns a copy of this node's state. On the leader after
// ConsistentRead it holds every acknowledged write.
func (s *Store) Backup() (*Backup, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	return f.backup(), nil
}

// Restore replaces the active tree and the draft with the backup's, in one
// command (RestoreState), and returns the new state index. Watchers of the
// active tree see the restored tree as a change. Only the leader can.
func (s *Store) Restore(ctx context.Context, b *Backup) (uint64, error) {
	if b == nil {
		return 0, fmt.Errorf("restore: %w: no backup", ErrInvalidCommand)
	}
	return s.do(ctx, RestoreState{Active: b.Active, Draft: b.Draft})
}
