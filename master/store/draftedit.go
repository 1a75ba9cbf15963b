package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/squallhq/squall/config"
)

// DraftEdit changes one part of draft ID, owned by User: a node or a rule
// (see config.Edit). Unlike EditDraft it carries only the change, so its
// log entry is about the size of the edit, and applying it copies only the
// nodes on the way to the change. The edit is checked against the draft
// when it is applied; a refused edit (ErrNoDraft, a *NotOwnerError, or
// ErrInvalidTree wrapping the config error) changes nothing.
type DraftEdit struct {
	ID   string
	User string
	Edit *config.Edit
	// Now becomes the draft's updated timestamp.
	Now time.Time
}

// draftEditPayload is the payload of DraftEdit. Nodes travel as their
// compact export file, rules in the API form.
type draftEditPayload struct {
	ID       string          `json:"id"`
	User     string          `json:"user"`
	NowMS    int64           `json:"now_ms"`
	Op       config.EditOp   `json:"op"`
	Path     []string        `json:"path"`
	Node     json.RawMessage `json:"node,omitempty"`
	Rule     json.RawMessage `json:"rule,omitempty"`
	RuleName string          `json:"rule_name,omitempty"`
	Position int             `json:"position,omitempty"`
}

func (DraftEdit) cmdType() cmdType { return typeDraftEdit }

func (c DraftEdit) payload() (any, error) {
	if c.ID == "" || c.User == "" || c.Edit == nil || len(c.Edit.Path) == 0 {
		return nil, fmt.Errorf("%w: a draft edit needs a draft id, a user, an edit and its path", ErrInvalidCommand)
	}
	e := c.Edit
	p := draftEditPayload{ID: c.ID, User: c.User, NowMS: c.Now.UnixMilli(), Op: e.Op, Path: e.Path, RuleName: e.RuleName, Position: e.Position}
	if e.Node != nil {
		raw, err := encodeTree(e.Node)
		if err != nil {
			return nil, err
		}
		p.Node = raw
	}
	if e.Rule != nil {
		raw, err := config.EncodeRule(e.Rule, config.FormAPI)
		if err != nil {
			return nil, fmt.Errorf("encode rule: %w", err)
		}
		p.Rule = raw
	}
	return p, nil
}

// edit decodes the payload's edit. Its errors are results (ErrInvalidTree):
// they are deterministic.
func (p *draftEditPayload) edit() (*config.Edit, error) {
	e := &config.Edit{Op: p.Op, Path: p.Path, RuleName: p.RuleName, Position: p.Position}
	if p.Node != nil {
		ex, err := config.DecodeExport(p.Node)
		if err != nil {
			return nil, fmt.Errorf("%w: node: %w", ErrInvalidTree, err)
		}
		e.Node = ex.Node
	}
	if p.Rule != nil {
		r, err := config.DecodeRule(p.Rule)
		if err != nil {
			return nil, fmt.Errorf("%w: rule: %w", ErrInvalidTree, err)
		}
		e.Rule = r
	}
	return e, nil
}

// bucketDraftEdits holds the draft edits applied since the draft's tree
// was last stored whole: the log entry of each (a DraftEdit), in order
// (under the bucket's sequence number). Reading the state replays them on the stored tree. After
// maxDraftEdits of them, or on a deploy, the tree is stored whole again
// and the bucket emptied, so that an edit writes its own size, not the
// tree's.
var bucketDraftEdits = []byte("draft_edits")

// maxDraftEdits is how many edits are kept before the draft's tree is
// stored whole again: replaying them on open costs little, and storing the
// tree of 20,000 rules costs about 0.3 s.
const maxDraftEdits = 256

// storedEditRules is the version of the validation rules replayDraftEdits
// applies stored edits with. Only the edits applied with it are stored as
// edits: after one applied with other rules the tree is stored whole, so
// that replaying never decides otherwise than applying did.
const storedEditRules = config.Rules1

// applyDraftEdit applies a DraftEdit to st and the state file, checking
// it with version rules of the validation rules.
func applyDraftEdit(b *bolt.Bucket, st *state, p *draftEditPayload, rules config.Rules) (refused error, err error) {
	e, err := p.edit()
	if err != nil {
		return err, nil
	}
	tree, size, err := e.ApplyRules(st.draft.Tree, st.draftSize, rules)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTree, err), nil
	}
	dr := *st.draft
	dr.Tree, dr.UpdatedMS = tree, p.NowMS
	if st.draftEdits+1 >= maxDraftEdits || rules != storedEditRules {
		raw, err := encodeTree(tree)
		if err != nil {
			return nil, err
		}
		if err := putDraft(b, &dr, raw); err != nil {
			return nil, err
		}
		st.draft, st.draftJSON, st.draftSize = &dr, raw, len(raw)
		return nil, clearDraftEdits(b.Tx(), st)
	}
	eb, err := b.Tx().CreateBucketIfNotExists(bucketDraftEdits)
	if err != nil {
		return nil, err
	}
	if st.draftEdits == 0 {
		if err := setFormat(b.Tx()); err != nil {
			return nil, err
		}
	}
	entry, err := appendEntry(typeDraftEdit, p)
	if err != nil {
		return nil, err
	}
	// Keys are the bucket's sequence: several edits may share a log entry.
	seq, err := eb.NextSequence()
	if err != nil {
		return nil, err
	}
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], seq)
	if err := eb.Put(key[:], entry); err != nil {
		return nil, err
	}
	st.draft, st.draftSize = &dr, size
	st.draftEdits++
	return nil, nil
}

// clearDraftEdits forgets the stored draft edits: the draft's tree was
// stored whole or the draft is gone.
func clearDraftEdits(tx *bolt.Tx, st *state) error {
	st.draftEdits = 0
	if err := tx.DeleteBucket(bucketDraftEdits); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	return nil
}

// replayDraftEdits applies the stored draft edits to st's draft.
func replayDraftEdits(tx *bolt.Tx, st *state) error {
	eb := tx.Bucket(bucketDraftEdits)
	if eb == nil || st.draft == nil {
		return nil
	}
	return eb.ForEach(func(k, v []byte) error {
		d, err := decodeCommand(v)
		if err != nil {
			return fmt.Errorf("draft edit %x: %w", k, err)
		}
		p, ok := d.p.(*draftEditPayload)
		if !ok {
			return fmt.Errorf("draft edit %x: a %s entry", k, d.typ)
		}
		e, err := p.edit()
		if err != nil {
			return fmt.Errorf("draft edit %x: %w", k, err)
		}
		tree, size, err := e.ApplyRules(st.draft.Tree, st.draftSize, storedEditRules)
		if err != nil {
			return fmt.Errorf("draft edit %x: %w", k, err)
		}
		st.draft.Tree, st.draft.UpdatedMS, st.draftSize = tree, p.NowMS, size
		st.draftEdits++
		return nil
	})
}

// draftJSONOf returns the export file of the draft's tree, encoding it
// when edits were applied since it was stored whole.
func draftJSONOf(st *state) (json.RawMessage, error) {
	if st.draftEdits == 0 {
		return st.draftJSON, nil
	}
	return encodeTree(st.draft.Tree)
}

// DraftView returns the draft from this node's state without copying its
// tree, or ErrNoDraft. The tree is shared: the caller must not modify it
// (the state never does: edits copy what they change).
func (s *Store) DraftView() (*Draft, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.draft == nil {
		return nil, ErrNoDraft
	}
	d := *f.st.draft
	return &d, nil
}

// EditDraftPart applies an edit of one part of draft id, owned by user:
// see [DraftEdit]. The edit is first checked against this node's draft,
// so that a refused edit costs no log entry; it is checked again when
// applied. It is submitted with sess (nil: none; see Apply).
func (s *Store) EditDraftPart(ctx context.Context, sess *Session, id, user string, e *config.Edit) error {
	f := s.fsm.Load()
	if f == nil {
		return ErrNotOpen
	}
	f.mu.RLock()
	d, size := f.st.draft, f.st.draftSize
	f.mu.RUnlock()
	switch {
	case d == nil || d.ID != id:
		return fmt.Errorf("draft %s: %w", id, ErrNoDraft)
	case d.Owner != user:
		return &NotOwnerError{DraftID: id, Owner: d.Owner}
	}
	if _, _, err := e.Apply(d.Tree, size); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	_, err := s.do(ctx, sess, DraftEdit{ID: id, User: user, Edit: e, Now: s.now()})
	return err
}
