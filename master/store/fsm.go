package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
)

// Result is the outcome of one applied command.
type Result struct {
	// Index is the state index after the command: for a command that
	// changed the state, the raft log index of the entry that carried it.
	Index uint64
	// Err is why the command was refused; a refused command changed
	// nothing. It matches ErrNoDraft, ErrNotOwner (a *NotOwnerError),
	// ErrOutOfScope (an *OutOfScopeError),
	// ErrInvalidTree (wrapping the config error), ErrNoFinding or
	// ErrInvalidCommand.
	Err error
	// Findings holds, for an InsertFindings command, the outcome of each
	// finding in the command's order.
	Findings []FindingOutcome
	// Replayed is set when the command carried a request id that the
	// state had applied before (see Session): it changed nothing now.
	Replayed bool
}

// fsm is the raft state machine: the state file (bbolt, separate from the
// raft log) and a decoded in-memory copy of it for reads.
//
// Raft calls ApplyBatch, Snapshot and Restore from one goroutine, so db and
// the fields written by apply need no lock against each other; mu guards
// what readers on other goroutines see.
type fsm struct {
	path    string
	logger  *slog.Logger
	metrics *metrics

	// db is replaced by Restore. Raft's FSM goroutine (apply, snapshot,
	// restore) uses it freely; other goroutines (the findings reads) hold
	// dbMu's read lock while they use it, and Restore and close hold the
	// write lock while the file is swapped or closed.
	dbMu sync.RWMutex
	db   *bolt.DB
	// keys is the dedupe index of the findings in db, used and replaced
	// (with db) only by raft's FSM goroutine.
	keys *findingKeys
	// level is the feature level of the entry forms this node applies
	// (FeatureLevel): it panics on an entry of a later form, as a binary
	// of that level does, and below LevelSessions it reads no raft
	// extension (the levels members advertise, the level an entry was
	// written under), as a binary without levels.
	level int
	// maxSessions bounds the request table (MaxSessions).
	maxSessions int
	// sessions indexes the request table by key; nil until first used
	// after open or a restore (see sessionIndexOf).
	sessions atomic.Pointer[sessionIndex]

	mu       sync.RWMutex
	st       state
	activeCh chan struct{} // closed and replaced when the active tree changes
	auditCh  chan struct{} // closed and replaced when audit records are added
	levelsCh chan struct{} // closed and replaced when the members' levels change
	closed   bool
	restores int // number of Restore calls that replaced the state
}

var (
	_ raft.BatchingFSM = (*fsm)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)

// boltOptions are the options of the state file and the raft log.
func boltOptions() *bolt.Options {
	o := &bolt.Options{
		// Fail instead of waiting forever when another process holds the file.
		Timeout:        time.Second,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	}
	if strconv.IntSize == 64 {
		// A write transaction that grows the memory map waits for every
		// open read transaction, and a snapshot being persisted is one:
		// mapping 1 GiB of address space up front (as etcd does with
		// 10 GiB) keeps applies from stalling behind snapshots.
		o.InitialMmapSize = 1 << 30
	}
	return o
}

// stateFileOptions are the options of the state file: boltOptions
// without fsync. The state file is never trusted after a crash: Open keeps
// it only when close marked it clean (see takeCleanMark), and otherwise
// rebuilds it from the newest snapshot and the raft log, which are synced.
func stateFileOptions() *bolt.Options {
	o := boltOptions()
	o.NoSync = true
	// Growing the file would otherwise fsync it, with every dirty page.
	o.NoGrowSync = true
	return o
}

// cleanSuffix names the marker file beside the state file that close
// writes once the state file is synced and closed.
const cleanSuffix = ".clean"

// takeCleanMark removes the clean marker of the state file at path and
// reports whether there was one. The removal is synced before it returns,
// so that no write to the state file (unsynced from now on) can be taken
// for clean after a crash.
func takeCleanMark(path string) (bool, error) {
	err := os.Remove(path + cleanSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove clean marker: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return false, err
	}
	return true, nil
}

// markClean records that the state file at path is synced and closed.
func markClean(path string) error {
	m, err := os.OpenFile(path+cleanSuffix, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write clean marker: %w", err)
	}
	_, err = m.WriteString("state file closed cleanly\n")
	if err := syncClose(m, err); err != nil {
		return fmt.Errorf("write clean marker: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// openFSM opens or creates the state file at path and loads it.
func openFSM(path string, logger *slog.Logger, m *metrics) (*fsm, error) {
	db, err := bolt.Open(path, 0o600, stateFileOptions())
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	if err := initState(db); err != nil {
		return nil, errorsJoinClose(fmt.Errorf("init state file %s: %w", path, err), db)
	}
	st, err := readState(db)
	if err != nil {
		return nil, errorsJoinClose(fmt.Errorf("read state file %s: %w", path, err), db)
	}
	keys, err := readFindingKeys(db)
	if err != nil {
		return nil, errorsJoinClose(fmt.Errorf("read state file %s: %w", path, err), db)
	}
	return &fsm{path: path, logger: logger, metrics: m, db: db, keys: keys, st: st, activeCh: make(chan struct{}), auditCh: make(chan struct{}),
		levelsCh: make(chan struct{}), level: FeatureLevel, maxSessions: MaxSessions}, nil
}

func errorsJoinClose(err error, c io.Closer) error {
	if cerr := c.Close(); cerr != nil {
		return fmt.Errorf("%w (and close: %w)", err, cerr)
	}
	return err
}

// close syncs and closes the state file, marks it clean, and wakes every
// waiter.
func (f *fsm) close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.activeCh)
		close(f.auditCh)
		close(f.levelsCh)
	}
	f.mu.Unlock()
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if err := f.db.Sync(); err != nil {
		return errorsJoinClose(fmt.Errorf("sync state file: %w", err), f.db)
	}
	if err := f.db.Close(); err != nil {
		return err
	}
	return markClean(f.path)
}

// appliedIndex returns the index of the last log entry in the state.
func (f *fsm) appliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.applied
}

// Apply applies one committed entry. Raft calls ApplyBatch instead, since
// fsm is a raft.BatchingFSM; Apply exists for the raft.FSM interface.
func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in one state-file transaction (as
// Vault does; not synced: see stateFileOptions). Each command entry's
// response is a Result, or []Result for a batch entry.
//
// An entry this binary cannot decode — an unknown type or version, or a
// payload that does not decode — panics. A committed entry must never be
// skipped: this node's state would silently diverge from the others', and
// every later read and snapshot would carry the difference. Crashing
// instead makes the problem visible, and the node recovers once it runs a
// binary that understands the entry. A failing state-file write panics for
// the same reason: the state file still holds the state before the batch,
// and raft replays the batch after a restart.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	resps := make([]any, len(logs))
	// Only the raft FSM goroutine writes f.st, so reading it here needs no lock.
	cur := f.st
	type job struct {
		i   int
		idx uint64
		d   decoded
	}
	var jobs []job
	last := cur.applied
	for i, l := range logs {
		if l.Index <= cur.applied {
			// Replayed after a restart: the state file already has it.
			continue
		}
		last = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		if lv := entryLevel(l.Data); lv > f.level {
			panic(fmt.Sprintf("store: cannot apply committed raft log entry %d (term %d): %s version %d "+
				"is of feature level %d, this node applies up to %d", l.Index, l.Term, cmdType(l.Data[0]), l.Data[1], lv, f.level))
		}
		d, err := decodeCommand(l.Data)
		if err != nil {
			panic(fmt.Sprintf("store: cannot apply committed raft log entry %d (term %d): %v; "+
				"refusing to skip it, which would make this node's state diverge", l.Index, l.Term, err))
		}
		if lv := formLevel(d); lv > f.level {
			panic(fmt.Sprintf("store: cannot apply committed raft log entry %d (term %d): it holds a form "+
				"of feature level %d, this node applies up to %d", l.Index, l.Term, lv, f.level))
		}
		switch {
		case f.level < LevelSessions:
			// A binary without levels reads no extension.
		case d.typ == typeSetMember:
			var x *auditExt
			d.p.(*setMemberPayload).level, x = decodeMemberExt(l.Extensions)
			if f.level >= LevelAudit {
				d.setAudit(x)
			}
		case len(l.Extensions) > 0:
			level, x, ok := decodeWrittenExt(l.Extensions)
			if !ok {
				panic(fmt.Sprintf("store: cannot apply committed raft log entry %d (term %d): written under feature level %q, "+
					"whose validation rules this binary (level %d) does not have; refusing to apply it with others, "+
					"which could make this node's state diverge", l.Index, l.Term, l.Extensions, FeatureLevel))
			}
			d.setLevel(level)
			if f.level >= LevelAudit {
				d.setAudit(x)
			}
		}
		jobs = append(jobs, job{i: i, idx: l.Index, d: d})
	}
	if last == cur.applied {
		return resps
	}

	next := cur
	start := time.Now()
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketState)
		for _, j := range jobs {
			resp, err := f.applyOne(b, &next, j.idx, j.d)
			if err != nil {
				return fmt.Errorf("entry %d (%s): %w", j.idx, j.d.typ, err)
			}
			resps[j.i] = resp
		}
		next.applied = last
		return putUint64(b, keyApplied, last)
	})
	if err != nil {
		panic(fmt.Sprintf("store: write state file %s: %v", f.path, err))
	}
	f.metrics.fsmApply.Observe(time.Since(start).Seconds())
	f.install(next)
	return resps
}

// install makes st the state readers see and wakes watchers of the active
// tree when it changed.
func (f *fsm) install(st state) {
	f.mu.Lock()
	changed := st.activeIndex != f.st.activeIndex
	audited := st.auditNext != f.st.auditNext
	leveled := st.levels != f.st.levels
	f.st = st
	if changed && !f.closed {
		close(f.activeCh)
		f.activeCh = make(chan struct{})
	}
	if audited && !f.closed {
		close(f.auditCh)
		f.auditCh = make(chan struct{})
	}
	if leveled && !f.closed {
		close(f.levelsCh)
		f.levelsCh = make(chan struct{})
	}
	f.mu.Unlock()
	f.metrics.stateIndex.Set(float64(st.index))
	f.metrics.activeIndex.Set(float64(st.activeIndex))
}

// applyOne applies one decoded command to st and the state bucket. A
// refused command is a Result with Err; the returned error is a failed
// write of the state file.
func (f *fsm) applyOne(b *bolt.Bucket, st *state, idx uint64, d decoded) (any, error) {
	if d.typ == typeBatch {
		results := make([]Result, 0, len(d.batch))
		for _, c := range d.batch {
			r, err := f.applyCommand(b, st, idx, c)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
		f.metrics.fsmCommands.WithLabelValues(typeBatch.String(), resultOK).Inc()
		return results, nil
	}
	if d.typ == typeSession {
		return f.applySession(b, st, idx, d)
	}
	return f.applyCommand(b, st, idx, d)
}

// Outcome labels of the command counter.
const (
	resultOK      = "ok"
	resultRefused = "refused"
)

func (f *fsm) applyCommand(b *bolt.Bucket, st *state, idx uint64, d decoded) (Result, error) {
	var before auditBefore
	if d.audit != nil {
		before = auditStateBefore(st, d)
	}
	r, err := applyTo(b, st, f.keys, idx, d)
	if err != nil {
		return Result{}, err
	}
	if d.audit != nil {
		if err := recordAudit(b.Tx(), st, idx, d, r, before); err != nil {
			return Result{}, fmt.Errorf("audit: %w", err)
		}
	}
	outcome := resultOK
	if r.Err != nil {
		outcome = resultRefused
	}
	f.metrics.fsmCommands.WithLabelValues(d.typ.String(), outcome).Inc()
	return r, nil
}

// applyTo applies one command. It is deterministic: it depends only on st,
// the state file (of which keys is an index), idx and the command, never on
// the clock, randomness or the local node.
func applyTo(b *bolt.Bucket, st *state, keys *findingKeys, idx uint64, d decoded) (Result, error) {
	refuse := func(err error) (Result, error) { return Result{Index: st.index, Err: err}, nil }
	rules := treeRules(d.level)
	// changed records a change and writes the state index.
	changed := func() (Result, error) {
		st.index = idx
		return Result{Index: idx}, putUint64(b, keyIndex, idx)
	}
	// refusedOrChanged is the outcome of a command applied by a function
	// that returns a refusal (nothing written) and a failed write.
	refusedOrChanged := func(refused, err error) (Result, error) {
		if err != nil {
			return Result{}, err
		}
		if refused != nil {
			return refuse(refused)
		}
		return changed()
	}
	setActive := func(tree *config.Node, raw []byte) error {
		st.active, st.activeJSON, st.activeIndex = tree, raw, idx
		if err := b.Put(keyActive, raw); err != nil {
			return err
		}
		return putUint64(b, keyActiveIndex, idx)
	}
	// setMembers stores the members m, in which member id changed, and
	// id's feature level (0: none, or removed).
	setMembers := func(m map[string]string, id string, level int) error {
		if err := putMembers(b, m); err != nil {
			return err
		}
		st.members = m
		if l := st.levels.with(id, level); l != st.levels {
			if err := putLevels(b, l); err != nil {
				return err
			}
			st.levels = l
		}
		return nil
	}
	// ownDraft checks that the draft id exists and user owns it.
	ownDraft := func(id, user string) error {
		if st.draft == nil || st.draft.ID != id {
			return fmt.Errorf("draft %s: %w", id, ErrNoDraft)
		}
		if st.draft.Owner != user {
			return &NotOwnerError{DraftID: id, Owner: st.draft.Owner}
		}
		return nil
	}

	switch p := d.p.(type) {
	case *treePayload:
		tree, err := decodeTree(p.Tree, rules)
		if err != nil {
			return refuse(err)
		}
		if err := setActive(tree, p.Tree); err != nil {
			return Result{}, err
		}
		return changed()

	case *createDraftPayload:
		if p.ID == "" || p.Owner == "" {
			return refuse(fmt.Errorf("%w: create draft needs an id and an owner", ErrInvalidCommand))
		}
		// A new draft starts with the active tree and its tests.
		dr := &Draft{ID: p.ID, Owner: p.Owner, CreatedMS: p.NowMS, UpdatedMS: p.NowMS, Tree: st.active, Tests: st.activeTests}
		if err := putDraft(b, dr, st.activeJSON); err != nil {
			return Result{}, err
		}
		if err := putTests(b, keyDraftTests, dr.Tests); err != nil {
			return Result{}, err
		}
		if err := clearDraftEdits(b.Tx(), st); err != nil {
			return Result{}, err
		}
		st.draft, st.draftJSON, st.draftSize = dr, st.activeJSON, len(st.activeJSON)
		return changed()

	case *editDraftPayload:
		if err := ownDraft(p.ID, p.User); err != nil {
			return refuse(err)
		}
		tree, err := decodeTree(p.Tree, rules)
		if err != nil {
			return refuse(err)
		}
		dr := *st.draft
		dr.Tree, dr.UpdatedMS = tree, p.NowMS
		if err := putDraft(b, &dr, p.Tree); err != nil {
			return Result{}, err
		}
		if err := clearDraftEdits(b.Tx(), st); err != nil {
			return Result{}, err
		}
		st.draft, st.draftJSON, st.draftSize = &dr, p.Tree, len(p.Tree)
		return changed()

	case *draftEditPayload:
		if err := ownDraft(p.ID, p.User); err != nil {
			return refuse(err)
		}
		return refusedOrChanged(applyDraftEdit(b, st, p, rules))

	case *deployScopedPayload:
		if err := ownDraft(p.ID, p.User); err != nil {
			return refuse(err)
		}
		if paths := config.DiffOutside(st.active, st.draft.Tree, p.Scope); len(paths) > 0 {
			return refuse(&OutOfScopeError{Scope: p.Scope, Paths: paths})
		}
		if len(st.draft.Tests) > 0 {
			return refuse(ErrTestsNotRun)
		}
		if err := deployDraft(b, st, setActive); err != nil {
			return Result{}, err
		}
		return changed()

	case *deployVersionPayload:
		return refusedOrChanged(applyDeployVersion(b, st, idx, p, nil, setActive))

	case *deployTestedPayload:
		return refusedOrChanged(applyDeployVersion(b, st, idx, &p.deployVersionPayload, &p.Tested, setActive))

	case *setDraftTestsPayload:
		return refusedOrChanged(applySetDraftTests(b, st, p))

	case *rollbackPayload:
		return refusedOrChanged(applyRollback(b, st, idx, p, rules, setActive))

	case *restoreVersionsPayload:
		return refusedOrChanged(applyRestoreVersions(b.Tx(), st, p))

	case *setMemberPayload:
		if p.ID == "" || p.HTTPAddr == "" {
			return refuse(fmt.Errorf("%w: set member needs an id and an HTTP address", ErrInvalidCommand))
		}
		m := maps.Clone(st.members)
		if m == nil {
			m = map[string]string{}
		}
		m[p.ID] = p.HTTPAddr
		if err := setMembers(m, p.ID, p.level); err != nil {
			return Result{}, err
		}
		return changed()

	case *memberPayload:
		if _, ok := st.members[p.ID]; !ok {
			return Result{Index: st.index}, nil
		}
		m := maps.Clone(st.members)
		delete(m, p.ID)
		if err := setMembers(m, p.ID, 0); err != nil {
			return Result{}, err
		}
		return changed()

	case *restorePayload:
		tree, err := decodeTree(p.Active, rules)
		if err != nil {
			return refuse(fmt.Errorf("active tree: %w", err))
		}
		var dr *Draft
		if rec := p.Draft; rec != nil {
			if rec.ID == "" || rec.Owner == "" {
				return refuse(fmt.Errorf("%w: a restored draft needs an id and an owner", ErrInvalidCommand))
			}
			dt, err := decodeTree(rec.Tree, rules)
			if err != nil {
				return refuse(fmt.Errorf("draft tree: %w", err))
			}
			dr = &Draft{ID: rec.ID, Owner: rec.Owner, CreatedMS: rec.CreatedMS, UpdatedMS: rec.UpdatedMS, Tree: dt, Tests: p.DraftTests}
		} else if len(p.DraftTests) > 0 {
			return refuse(fmt.Errorf("%w: restored draft tests without a draft", ErrInvalidCommand))
		}
		for _, files := range [][]TestFile{p.DraftTests, p.ActiveTests} {
			if err := CheckTestFiles(files); err != nil {
				return refuse(err)
			}
		}
		if err := setActive(tree, p.Active); err != nil {
			return Result{}, err
		}
		if err := setActiveTests(b, st, p.ActiveTests); err != nil {
			return Result{}, err
		}
		var draftTests []TestFile
		if dr != nil {
			draftTests = dr.Tests
		}
		if err := putTests(b, keyDraftTests, draftTests); err != nil {
			return Result{}, err
		}
		if dr != nil {
			if err := putDraft(b, dr, p.Draft.Tree); err != nil {
				return Result{}, err
			}
			st.draft, st.draftJSON, st.draftSize = dr, p.Draft.Tree, len(p.Draft.Tree)
		} else {
			if err := b.Delete(keyDraft); err != nil {
				return Result{}, err
			}
			st.draft, st.draftJSON, st.draftSize = nil, nil, 0
		}
		if err := clearDraftEdits(b.Tx(), st); err != nil {
			return Result{}, err
		}
		return changed()

	case *insertFindingsPayload:
		outs, err := applyInsertFindings(b.Tx(), keys, p)
		if err != nil {
			return Result{}, err
		}
		for _, o := range outs {
			if o.Created {
				// At least one finding is new: the state changed.
				r, err := changed()
				r.Findings = outs
				return r, err
			}
		}
		return Result{Index: st.index, Findings: outs}, nil

	case *assignIDsPayload:
		assigned, refused, err := applyAssignIDs(b.Tx(), p)
		if err != nil {
			return Result{}, err
		}
		if refused != nil {
			return refuse(refused)
		}
		st.ids = true
		if !assigned {
			// Ids turned on, none given: nothing a reader sees changed.
			return Result{Index: st.index}, nil
		}
		return changed()

	case *saveBacktestPayload, *deleteBacktestsPayload:
		var did bool
		var refused, err error
		if sp, ok := p.(*saveBacktestPayload); ok {
			did, refused, err = applySaveBacktest(b.Tx(), sp)
		} else {
			did, refused, err = applyDeleteBacktests(b.Tx(), p.(*deleteBacktestsPayload))
		}
		switch {
		case err != nil:
			return Result{}, err
		case refused != nil:
			return refuse(refused)
		case !did:
			return Result{Index: st.index}, nil
		}
		return changed()

	case *clearFindingsPayload:
		had, err := applyClearFindings(b.Tx(), keys)
		if err != nil || !had {
			return Result{Index: st.index}, err
		}
		return changed()

	case *patchFindingPayload:
		if err := applyPatchFinding(b.Tx(), p); err != nil {
			if errors.Is(err, ErrNoFinding) || errors.Is(err, ErrInvalidCommand) {
				return refuse(err)
			}
			return Result{}, err
		}
		return changed()

	case *draftUserPayload:
		switch d.typ {
		case typeTakeOver:
			if st.draft == nil || st.draft.ID != p.ID {
				return refuse(fmt.Errorf("draft %s: %w", p.ID, ErrNoDraft))
			}
			dr := *st.draft
			if d.level >= LevelDisplaced {
				dr.Displaced = displace(dr.Displaced, dr.Owner, p.User)
			}
			dr.Owner = p.User
			if err := putDraft(b, &dr, st.draftJSON); err != nil {
				return Result{}, err
			}
			st.draft = &dr
			return changed()

		case typeDeploy:
			if err := ownDraft(p.ID, p.User); err != nil {
				return refuse(err)
			}
			if len(st.draft.Tests) > 0 {
				return refuse(ErrTestsNotRun)
			}
			if err := deployDraft(b, st, setActive); err != nil {
				return Result{}, err
			}
			return changed()

		case typeDeleteDraft:
			if err := ownDraft(p.ID, p.User); err != nil {
				return refuse(err)
			}
			if err := b.Delete(keyDraft); err != nil {
				return Result{}, err
			}
			if err := b.Delete(keyDraftTests); err != nil {
				return Result{}, err
			}
			if err := clearDraftEdits(b.Tx(), st); err != nil {
				return Result{}, err
			}
			st.draft, st.draftJSON, st.draftSize = nil, nil, 0
			return changed()
		}
	}
	// decodeCommand only returns the payloads handled above.
	panic(fmt.Sprintf("store: no handler for decoded %s command %T", d.typ, d.p))
}

// deployDraft makes the draft's tree the active tree with setActive. A
// draft with edits applied since it was stored whole is encoded once and
// stored whole again.
func deployDraft(b *bolt.Bucket, st *state, setActive func(*config.Node, []byte) error) error {
	return deployDraftEncoded(b, st, nil, setActive)
}

// deployDraftEncoded is deployDraft with the draft's tree already encoded
// by encodeTree (nil: not), which a draft with edits stores as it is.
func deployDraftEncoded(b *bolt.Bucket, st *state, encoded json.RawMessage, setActive func(*config.Node, []byte) error) error {
	if st.draftEdits > 0 {
		raw := encoded
		if raw == nil {
			var err error
			if raw, err = draftJSONOf(st); err != nil {
				return err
			}
		}
		if err := putDraft(b, st.draft, raw); err != nil {
			return err
		}
		st.draftJSON, st.draftSize = raw, len(raw)
		if err := clearDraftEdits(b.Tx(), st); err != nil {
			return err
		}
	}
	return setActive(st.draft.Tree, st.draftJSON)
}

// active returns a copy of the active tree and its index.
func (f *fsm) active() (*config.Node, uint64) {
	f.mu.RLock()
	tree, idx := f.st.active, f.st.activeIndex
	f.mu.RUnlock()
	return tree.Clone(), idx
}

// draft returns a copy of the draft, or ErrNoDraft.
func (f *fsm) draft() (*Draft, error) {
	f.mu.RLock()
	d := f.st.draft
	f.mu.RUnlock()
	if d == nil {
		return nil, ErrNoDraft
	}
	return d.Clone(), nil
}

// httpAddr returns the HTTP address recorded for member id, or "".
func (f *fsm) httpAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.members[id]
}

// members returns a copy of the member id -> HTTP address map.
func (f *fsm) members() map[string]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.members)
}

// indexes returns the state index and the active tree's index.
func (f *fsm) indexes() (state, active uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.index, f.st.activeIndex
}

// waitActive returns the active tree as soon as its index exceeds after,
// or the current one when ctx ends. The error is ErrClosed once the fsm is
// closed.
func (f *fsm) waitActive(ctx context.Context, after uint64) (*config.Node, uint64, error) {
	for {
		f.mu.RLock()
		tree, idx, ch, closed := f.st.active, f.st.activeIndex, f.activeCh, f.closed
		f.mu.RUnlock()
		if idx > after {
			return tree.Clone(), idx, nil
		}
		if closed {
			return tree.Clone(), idx, ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return tree.Clone(), idx, nil
		}
	}
}

// Snapshot starts a read transaction on the state file; Persist streams it.
// Apply goes on concurrently: bbolt readers see a fixed version.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("snapshot: begin read: %w", err)
	}
	return &fsmSnapshot{tx: tx}, nil
}

// fsmSnapshot is a state file version being written to a snapshot sink.
type fsmSnapshot struct {
	tx *bolt.Tx
}

// Persist writes the state file, as a complete bbolt file, to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		return errorsJoinCancel(fmt.Errorf("snapshot: write state: %w", err), sink)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("snapshot: close sink: %w", err)
	}
	return nil
}

func errorsJoinCancel(err error, sink raft.SnapshotSink) error {
	if cerr := sink.Cancel(); cerr != nil {
		return fmt.Errorf("%w (and cancel: %w)", err, cerr)
	}
	return err
}

// Release ends the read transaction.
func (s *fsmSnapshot) Release() {
	// A read-only transaction's Rollback only releases it.
	_ = s.tx.Rollback()
}

// Restore replaces the state with a snapshot: it writes the stream to a
// temporary file beside the state file, checks that it decodes, and renames
// it over the state file, so a failed restore leaves the old state intact.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.path)+".restore-*")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	tmpPath := tmp.Name()
	defer os.Remove(tmpPath) // a no-op after the rename
	_, err = io.Copy(tmp, rc)
	if err := syncClose(tmp, err); err != nil {
		return fmt.Errorf("restore: write %s: %w", tmpPath, err)
	}
	// Check the new file before touching the current one.
	st, keys, err := readStateFile(tmpPath)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	// Past this point the old state file is gone: failing would leave the
	// node without state, so a failure panics (see ApplyBatch).
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("restore: close state file: %w", err)
	}
	if err := os.Rename(tmpPath, f.path); err != nil {
		panic(fmt.Sprintf("store: restore: rename %s: %v", tmpPath, err))
	}
	if err := syncDir(dir); err != nil {
		panic(fmt.Sprintf("store: restore: %v", err))
	}
	db, err := bolt.Open(f.path, 0o600, stateFileOptions())
	if err != nil {
		panic(fmt.Sprintf("store: restore: reopen %s: %v", f.path, err))
	}
	f.db, f.keys = db, keys
	f.sessions.Store(nil)
	f.mu.Lock()
	f.restores++
	f.mu.Unlock()
	f.install(st)
	f.metrics.fsmRestores.Inc()
	f.logger.Info("restored state from snapshot", "applied_index", st.applied, "state_index", st.index, "active_index", st.activeIndex)
	return nil
}

// readStateFile opens a state file read-only and decodes it.
func readStateFile(path string) (state, *findingKeys, error) {
	opts := boltOptions()
	opts.ReadOnly = true
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return state{}, nil, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := readState(db)
	var keys *findingKeys
	if err == nil {
		keys, err = readFindingKeys(db)
	}
	if err != nil {
		return state{}, nil, errorsJoinClose(fmt.Errorf("read %s: %w", path, err), db)
	}
	if err := db.Close(); err != nil {
		return state{}, nil, fmt.Errorf("close %s: %w", path, err)
	}
	return st, keys, nil
}

// readFindingKeys loads the dedupe index of a state file's findings.
func readFindingKeys(db *bolt.DB) (*findingKeys, error) {
	var keys *findingKeys
	err := db.View(func(tx *bolt.Tx) (err error) {
		keys, err = loadFindingKeys(tx)
		return err
	})
	return keys, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := syncClose(d, nil); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// syncClose syncs f, unless writing it failed with werr, and closes it:
// the first error of the three.
func syncClose(f *os.File, werr error) error {
	err := werr
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// displace returns the displaced users of a draft after to takes it over
// from from: from added (unless the owner takes over its own draft), to
// removed. It builds a new list; displaced is shared.
func displace(displaced []string, from, to string) []string {
	out := make([]string, 0, len(displaced)+1)
	for _, u := range displaced {
		if u != to && u != from {
			out = append(out, u)
		}
	}
	if from != to {
		out = append(out, from)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
