package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/textlist"
	"github.com/squallhq/squall/master/audit"
)

// The audit log (docs/decisions.md decision 61): from feature level
// LevelAudit on, the leader writes the context of each entry that changes
// the replicated state (the request's user, authorization and id, its own
// time, the retention) into the entry's raft extensions, and applying the
// entry writes one audit.Record per command, chained by hashes. Every
// input of a record is in the entry or the state, so every master writes
// the same chain.

// LevelAudit is the feature level from which entries carry their audit
// context and applying them records the audit log. Below it nothing is
// recorded: a master of level 3 would record nothing, and the chains of a
// mixed cluster would differ.
const LevelAudit = 4

// DefaultAuditKeep is how many audit records the state keeps by default.
const DefaultAuditKeep = 100_000

// MaxAuditKeep bounds Config.AuditKeep.
const MaxAuditKeep = 10_000_000

// Origin is who asked for a change: the request's user, the name of the
// token's authorization it acted under, and its request id. The HTTP
// layer puts it in the request's context (ContextWithOrigin); Store.Apply
// and Store.Batch write it into the entry for the audit log.
type Origin struct {
	User          string
	Authorization string
	RequestID     string
}

type originContextKey struct{}

// ContextWithOrigin returns ctx carrying o.
func ContextWithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originContextKey{}, o)
}

// OriginFromContext returns the origin ctx carries (zero: none).
func OriginFromContext(ctx context.Context) Origin {
	o, _ := ctx.Value(originContextKey{}).(Origin)
	return o
}

// auditExt is the audit context of an entry, in its raft extensions
// (writtenExt.Audit, memberExt.Audit): the origin, the leader's time, and
// the retention every node applies after recording.
type auditExt struct {
	User      string `json:"user,omitempty"`
	Auth      string `json:"auth,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	NowMS     int64  `json:"now_ms"`
	Keep      int    `json:"keep"`
	MaxAgeMS  int64  `json:"max_age_ms,omitempty"`
}

// auditContext returns the audit context of an entry submitted with ctx
// at level (nil below LevelAudit).
func (s *Store) auditContext(ctx context.Context, level int) *auditExt {
	if level < LevelAudit {
		return nil
	}
	o := OriginFromContext(ctx)
	return &auditExt{User: o.User, Auth: o.Authorization, RequestID: o.RequestID, NowMS: s.now().UnixMilli(),
		Keep: s.cfg.AuditKeep, MaxAgeMS: s.cfg.AuditMaxAge.Milliseconds()}
}

// audited reports whether applying cmd records in the audit log (inserts
// of findings, the engines' traffic, do not).
func audited(cmd Command) bool {
	_, insert := cmd.(InsertFindings)
	return !insert
}

// The state file's audit log: bucket "audit" maps the sequence number
// (uint64 big-endian) to the record's JSON; the state bucket's
// "audit_next" key is the next number.
var (
	bucketAudit  = []byte("audit")
	keyAuditNext = []byte("audit_next")
)

// formatAudit is the state file format from which it may hold audit
// records.
const formatAudit = 7

func auditKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// auditBefore is what a record needs of the state before its command.
type auditBefore struct {
	memberAddr  string
	memberLevel int
	hadMember   bool
}

func auditStateBefore(st *state, d decoded) auditBefore {
	if p, ok := d.p.(*setMemberPayload); ok {
		addr, had := st.members[p.ID]
		return auditBefore{memberAddr: addr, memberLevel: st.levels.get(p.ID), hadMember: had}
	}
	return auditBefore{}
}

// recordAudit writes the record of command d, applied at idx with result
// r, and prunes the log to the entry's retention. A command that changed
// nothing and was not refused (a member registering again alike, a
// removal of an unknown member) records nothing.
func recordAudit(tx *bolt.Tx, st *state, idx uint64, d decoded, r Result, before auditBefore) error {
	x := d.audit
	rec := audit.Record{TimeMS: x.NowMS, Index: idx, User: x.User, Authorization: x.Auth, RequestID: x.RequestID, Result: audit.ResultApplied}
	if r.Err != nil {
		rec.Result, rec.Code = audit.ResultRefused, auditCode(r.Err)
	} else if r.Index != idx {
		return nil
	}
	user := ""
	switch p := d.p.(type) {
	case *treePayload:
		rec.Action = "tree.replace"
	case *createDraftPayload:
		rec.Action, rec.Target, user = "draft.create", p.ID, p.Owner
	case *editDraftPayload:
		rec.Action, rec.Target, rec.Detail, user = "draft.edit", p.ID, "replace the tree", p.User
	case *draftEditPayload:
		rec.Action, rec.Target, user = "draft.edit", p.ID, p.User
		rec.Detail = fmt.Sprintf("%s %s", p.Op, config.PathString(p.Path))
		if p.RuleName != "" {
			rec.Detail += " rule " + p.RuleName
		}
	case *deployScopedPayload:
		rec.Action, rec.Target, user = "tree.deploy", p.ID, p.User
		rec.Detail = "scope " + config.PathString(p.Scope)
	case *deployVersionPayload:
		rec.Action, rec.Target, user = "tree.deploy", p.ID, p.User
		rec.Detail = versionDetail(st, idx, p.Scope)
	case *deployTestedPayload:
		rec.Action, rec.Target, user = "tree.deploy", p.ID, p.User
		rec.Detail = versionDetail(st, idx, p.Scope)
		if p.Tested.Tests != "" {
			rec.Detail = strings.TrimPrefix(rec.Detail+", tests "+p.Tested.Tests[:12]+" passed", ", ")
		}
	case *setDraftTestsPayload:
		rec.Action, rec.Target, user = "draft.tests", p.ID, p.User
		rec.Detail = testsDetail(p.Tests)
	case *rollbackPayload:
		rec.Action, rec.Target, user = "tree.rollback", fmt.Sprintf("version %d", p.Version), p.User
		rec.Detail = versionDetail(st, idx, p.Scope)
	case *restoreVersionsPayload:
		rec.Action, rec.Detail = "versions.restore", fmt.Sprintf("%d versions", len(p.Versions))
	case *restorePayload:
		rec.Action = "state.restore"
	case *patchFindingPayload:
		rec.Action, rec.Target = "finding.patch", p.Tenant+"/"+p.UID
		rec.Detail = patchDetail(p)
	case *clearFindingsPayload:
		rec.Action = "findings.clear"
	case *saveBacktestPayload:
		if p.Finished {
			return nil // an engine's result, or a backtest its leader lost
		}
		rec.Action, rec.Target, user = "backtest.create", p.ID, p.User
	case *deleteBacktestsPayload:
		rec.Action, rec.Target = "backtest.delete", p.ID
		if p.ID == "" {
			rec.Action, rec.Detail = "backtests.expire", fmt.Sprintf("finished before %d ms", p.FinishedBeforeMS)
		}
	case *assignIDsPayload:
		rec.Action = "ids.assign"
		if p.Replace {
			rec.Detail = fmt.Sprintf("replace: %d tools, %d tenants", len(p.Tools), len(p.Tenants))
		}
	case *setMemberPayload:
		if r.Err == nil && before.hadMember && before.memberAddr == p.HTTPAddr && before.memberLevel == p.level {
			return nil
		}
		rec.Action, rec.Target = "member.set", p.ID
		rec.Detail = fmt.Sprintf("http %s, feature level %d", p.HTTPAddr, p.level)
	case *memberPayload:
		rec.Action, rec.Target = "member.remove", p.ID
	case *draftUserPayload:
		rec.Target, user = p.ID, p.User
		switch d.typ {
		case typeTakeOver:
			rec.Action = "draft.take_over"
		case typeDeploy:
			rec.Action = "tree.deploy"
		case typeDeleteDraft:
			rec.Action = "draft.delete"
		}
	default:
		return nil
	}
	if rec.User == "" {
		rec.User = user
	}
	if err := raiseFormat(tx, formatAudit); err != nil {
		return err
	}
	ab, err := tx.CreateBucketIfNotExists(bucketAudit)
	if err != nil {
		return err
	}
	ab.FillPercent = 0.9 // keys only grow
	sb := tx.Bucket(bucketState)
	next, err := getUint64(sb, keyAuditNext)
	if err != nil {
		return err
	}
	rec.Seq = max(next, 1)
	if k, v := ab.Cursor().Last(); k != nil {
		last, err := decodeAuditRecord(k, v)
		if err != nil {
			return err
		}
		rec.Prev = last.Hash
	}
	rec = audit.Seal(rec)
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := ab.Put(auditKey(rec.Seq), raw); err != nil {
		return err
	}
	if err := putUint64(sb, keyAuditNext, rec.Seq+1); err != nil {
		return err
	}
	st.auditNext = rec.Seq + 1
	return pruneAudit(ab, sb, rec.Seq, x.Keep, x.NowMS-x.MaxAgeMS, x.MaxAgeMS > 0)
}

// pruneAudit deletes the oldest records while more than keep remain or,
// with byAge, while they are older than beforeMS; the newest (last) is
// always kept.
func pruneAudit(ab, sb *bolt.Bucket, last uint64, keep int, beforeMS int64, byAge bool) error {
	keep = max(keep, 1)
	c := ab.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		seq := binary.BigEndian.Uint64(k)
		if seq == last {
			return nil
		}
		over := last-seq+1 > uint64(keep)
		if !over && byAge {
			var r audit.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("audit record %d: %w", seq, err)
			}
			over = r.TimeMS < beforeMS
		}
		if !over {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// versionDetail names the version the entry at idx recorded, if it did.
func versionDetail(st *state, idx uint64, scope []string) string {
	var parts []string
	if n := len(st.versions); n > 0 && st.versions[n-1].Index == idx {
		parts = append(parts, fmt.Sprintf("version %d", st.versions[n-1].Number))
	}
	if len(scope) > 0 {
		parts = append(parts, "scope "+config.PathString(scope))
	}
	return strings.Join(parts, ", ")
}

// patchDetail lists the fields a patch sets.
func patchDetail(p *patchFindingPayload) string {
	var parts []string
	add := func(name string, v *string) {
		if v != nil {
			parts = append(parts, name+"="+*v)
		}
	}
	add("state", p.State)
	add("ticket", p.Ticket)
	add("priority", p.Priority)
	add("severity", p.Severity)
	return strings.Join(parts, " ")
}

// auditCode is the code a refusal records: the class of Result.Err.
func auditCode(err error) string {
	switch {
	case errors.Is(err, ErrNoDraft):
		return "NO_DRAFT"
	case errors.Is(err, ErrNotOwner):
		return "NOT_OWNER"
	case errors.Is(err, ErrOutOfScope):
		return "OUT_OF_SCOPE"
	case errors.Is(err, ErrInvalidTree):
		return "INVALID_TREE"
	case errors.Is(err, ErrNoFinding):
		return "NO_FINDING"
	case errors.Is(err, ErrDraftExists):
		return "DRAFT_EXISTS"
	case errors.Is(err, ErrNoVersion):
		return "NO_VERSION"
	case errors.Is(err, ErrNoVersionNode):
		return "NO_VERSION_NODE"
	case errors.Is(err, ErrRequestMismatch):
		return "REQUEST_MISMATCH"
	case errors.Is(err, ErrDraftChanged):
		return "DRAFT_CHANGED"
	case errors.Is(err, ErrTestsNotRun):
		return "TESTS_NOT_RUN"
	case errors.Is(err, ErrNoBacktest):
		return "NO_BACKTEST"
	case errors.Is(err, ErrBacktestsFull):
		return "BACKTESTS_FULL"
	case errors.Is(err, ErrInvalidCommand):
		return "INVALID_COMMAND"
	}
	return "REFUSED"
}

// AuditQuery selects records of the audit log.
type AuditQuery struct {
	// User and Action, when set, must equal the record's.
	User, Action string
	// Since and Until bound the record's time (zero: unbounded); Until
	// is exclusive.
	Since, Until time.Time
	// Before, when set, lists only records of a lower sequence number
	// (paging).
	Before uint64
	// Limit bounds the records returned (at least 1).
	Limit int
}

// Audit returns the records q selects, newest first, and the Before of
// the next page (0: none).
func (s *Store) Audit(q AuditQuery) ([]audit.Record, uint64, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, 0, ErrNotOpen
	}
	limit := max(q.Limit, 1)
	var out []audit.Record
	var next uint64
	err := f.view(func(tx *bolt.Tx) error {
		ab := tx.Bucket(bucketAudit)
		if ab == nil {
			return nil
		}
		c := ab.Cursor()
		var k, v []byte
		if q.Before > 0 {
			k, v = c.Seek(auditKey(q.Before))
			if k == nil {
				k, v = c.Last()
			}
			if k != nil && binary.BigEndian.Uint64(k) >= q.Before {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			r, err := decodeAuditRecord(k, v)
			if err != nil {
				return err
			}
			// Times follow the leaders' clocks, which a change of leader
			// may set back: every record is looked at.
			if (q.User != "" && r.User != q.User) || (q.Action != "" && r.Action != q.Action) ||
				(!q.Since.IsZero() && r.TimeMS < q.Since.UnixMilli()) ||
				(!q.Until.IsZero() && r.TimeMS >= q.Until.UnixMilli()) {
				continue
			}
			if len(out) == limit {
				next = out[len(out)-1].Seq
				break
			}
			out = append(out, r)
		}
		return nil
	})
	return out, next, err
}

// AuditRecords returns every record of the audit log, oldest first.
func (s *Store) AuditRecords() ([]audit.Record, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	var out []audit.Record
	err := f.view(func(tx *bolt.Tx) (err error) {
		out, err = readAudit(tx, 0, 0)
		return err
	})
	return out, err
}

// readAudit reads the records of a state file of sequence numbers from
// first on, oldest first, up to limit of them (0: all).
func readAudit(tx *bolt.Tx, first uint64, limit int) ([]audit.Record, error) {
	ab := tx.Bucket(bucketAudit)
	if ab == nil {
		return nil, nil
	}
	var out []audit.Record
	c := ab.Cursor()
	for k, v := c.Seek(auditKey(first)); k != nil && (limit == 0 || len(out) < limit); k, v = c.Next() {
		r, err := decodeAuditRecord(k, v)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeAuditRecord decodes the record v stored under key k.
func decodeAuditRecord(k, v []byte) (audit.Record, error) {
	var r audit.Record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("audit record %x: %w", k, err)
	}
	return r, nil
}

// ReadAuditFile returns the audit records of a state file (a master's
// fsm.db or a raft snapshot's state.bin), oldest first, opened read-only.
// The file must not be open in a running master.
func ReadAuditFile(path string) ([]audit.Record, error) {
	opts := boltOptions()
	opts.ReadOnly = true
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var out []audit.Record
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketState) == nil {
			return errors.New("not a state file (no state bucket)")
		}
		var err error
		out, err = readAudit(tx, 0, 0)
		return err
	})
	if err != nil {
		return nil, errorsJoinClose(fmt.Errorf("read %s: %w", path, err), db)
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", path, err)
	}
	return out, nil
}

// ReadBackupAudit returns the audit records of a backup file, oldest
// first, reading its findings as a stream without keeping them. A backup
// before format 4 holds none.
func ReadBackupAudit(r io.Reader) ([]audit.Record, error) {
	var out []audit.Record
	err := decodeBackup(r, func(b *Backup) error {
		out = b.Audit
		return nil
	}, func(Finding) error { return nil })
	return out, err
}

// AuditAfter returns up to limit records of sequence numbers above
// after, oldest first (the records an audit sink has not written yet).
func (s *Store) AuditAfter(after uint64, limit int) ([]audit.Record, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	limit = max(limit, 1)
	var out []audit.Record
	err := f.view(func(tx *bolt.Tx) (err error) {
		out, err = readAudit(tx, after+1, limit)
		return err
	})
	return out, err
}

// WaitAudit returns once the state holds a record of sequence number
// above after, or when ctx ends (nil: the caller looks again), or with
// ErrClosed once the store is closed.
func (s *Store) WaitAudit(ctx context.Context, after uint64) error {
	f := s.fsm.Load()
	if f == nil {
		return ErrNotOpen
	}
	for {
		f.mu.RLock()
		next, ch, closed := f.st.auditNext, f.auditCh, f.closed
		f.mu.RUnlock()
		if next > after+1 {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// testsDetail describes a set of test files: how many, and their names
// (the first few).
func testsDetail(files []TestFile) string {
	if len(files) == 0 {
		return "no test files"
	}
	noun := "test files"
	if len(files) == 1 {
		noun = "test file"
	}
	names := textlist.Join(files, 5, ", ", func(f TestFile) string { return f.Name })
	return fmt.Sprintf("%d %s: %s", len(files), noun, names)
}
