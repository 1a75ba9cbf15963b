package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	// SessionWindow is how long the table remembers an applied request,
	// by the leader's clock stamped into the commands (never the clock
	// of the node applying them): far longer than a resend takes (at
	// most maxLeaderFailures waits for a leader of a few seconds each).
	SessionWindow = 5 * time.Minute
	// MaxSessions bounds the table: a new entry beyond it evicts the
	// oldest. An entry takes about 120 bytes of the state file with an
	// answer of "null" (a 40-byte key, time then request key, a 42-byte
	// record and the answer, bbolt's 16-byte element header, pages 90 %
	// full; measured: 119 bytes), plus any longer answer, and 63 bytes of
	// memory in the index of keys (measured): about 12 MB on disk and
	// 6 MB of memory at the cap.
	MaxSessions = 100_000
)

// typeSession wraps a command with its request id.
const typeSession cmdType = 22

// ErrRequestMismatch is the outcome of a command whose request id the
// table holds for a different request (another body for the same
// idempotency key). It changes nothing.
var ErrRequestMismatch = errors.New("the request id was already used for a different request")

// bucketSessions holds the table: now_ms (8 bytes, big-endian) and the
// request key -> the record (see encodeSessionRecord). Its keys sort by
// time, so that new entries go to its end and expired ones leave from
// its start (few pages touched per write); lookups by request key use an
// index in memory (sessionIndex), built from the bucket when first used.
var bucketSessions = []byte("sessions")

// sessionIndex maps the request keys of the table to their time. The FSM
// goroutine changes it while it applies entries; readers (the leader's
// lookups) hold mu's read lock.
type sessionIndex struct {
	mu    sync.RWMutex
	byKey map[[SessionKeySize]byte]int64
}

// loadSessionIndex builds the index of a table (b nil: no table yet).
func loadSessionIndex(b *bolt.Bucket) (*sessionIndex, error) {
	idx := &sessionIndex{byKey: make(map[[SessionKeySize]byte]int64)}
	if b == nil {
		return idx, nil
	}
	err := b.ForEach(func(k, _ []byte) error {
		if len(k) != 8+SessionKeySize {
			return fmt.Errorf("session key of %d bytes", len(k))
		}
		idx.byKey[[SessionKeySize]byte(k[8:])] = int64(binary.BigEndian.Uint64(k[:8]))
		return nil
	})
	return idx, err
}

// get returns the time of key's entry.
func (x *sessionIndex) get(key [SessionKeySize]byte) (int64, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ms, ok := x.byKey[key]
	return ms, ok
}

func (x *sessionIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byKey)
}

func (x *sessionIndex) put(key [SessionKeySize]byte, ms int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.byKey[key] = ms
}

func (x *sessionIndex) delete(key [SessionKeySize]byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byKey, key)
}

// sessionIndexOf returns f's index of the table, building it from tx
// the first time (after open or a restore).
func (f *fsm) sessionIndexOf(tx *bolt.Tx) (*sessionIndex, error) {
	if idx := f.sessions.Load(); idx != nil {
		return idx, nil
	}
	idx, err := loadSessionIndex(tx.Bucket(bucketSessions))
	if err != nil {
		return nil, err
	}
	if !f.sessions.CompareAndSwap(nil, idx) {
		return f.sessions.Load(), nil
	}
	return idx, nil
}

// SessionKeySize is the size of a request's key in the table.
const SessionKeySize = 32

// Session is one request's entry in the table, before it is applied: its
// key (a digest of the caller's identity, the request's target and its
// id), the digest of its body, and the answer the handler gives when the
// command succeeds, if it knows it before (see [Session.SetAnswer]). A
// Session wraps one command: see [Store.Apply].
//
// Request sessions: the state machine remembers, for a while, which
// requests it applied, so that a request sent again after a leader failed
// while it had it is applied at most once (the client sessions of the
// Raft thesis, section 6.3, in a simple form).
//
// The node that receives a write gives it a request id; the leader's
// handler passes the request's Session to the one [Store.Apply] that
// submits its change (a write of the draft, the active tree or a
// finding's triage), which wraps the command with it; applying a wrapped
// command whose id the table already holds changes nothing and returns
// Result.Replayed. Why a resend through a new leader is then applied
// exactly once: the first attempt's entry E1 was appended by the old
// leader. Either E1 is in the new leader's log — raft's leader
// completeness puts every committed entry there — and then it precedes
// every entry the new leader appends, the resend's E2 included, so E1 is
// applied first and E2 finds its id; or E1 is not in the new leader's
// log, and then it never commits: the new leader's first committed entry
// overwrites it on the followers, and every later leader's log extends
// that entry. Either way one of E1 and E2 takes effect.
//
// The table is part of the state file, so it is replicated with the log
// and travels in snapshots; a state file or snapshot written before the
// table existed has none and loads as an empty table.
type Session struct {
	Key         [SessionKeySize]byte
	Fingerprint [32]byte
	// Digest, if set, computes Fingerprint when the command is submitted
	// (the digest of the body the handler has read by then).
	Digest func() [32]byte

	status int
	answer []byte
	used   atomic.Bool
}

// SetAnswer records the answer a handler gives when its command succeeds,
// before it submits the command: it is stored with the outcome, so that a
// resent request is answered alike without running the handler again
// (whose checks against the state would see its own first attempt). On a
// nil session (a request without one) it does nothing.
func (s *Session) SetAnswer(status int, answer []byte) {
	if s != nil {
		s.status, s.answer = status, answer
	}
}

type sessionContextKey struct{}

// ContextWithSession returns ctx carrying s, for the HTTP layer: the
// middleware that gives a request its session hands it to the handler
// in the request's context, and the handler takes it out with
// [SessionFromContext] and passes it to [Store.Apply]. The store never
// reads it from a context.
func ContextWithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionContextKey{}, s)
}

// SessionFromContext returns the session ctx carries, or nil.
func SessionFromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionContextKey{}).(*Session)
	return s
}

// SessionOutcome is what the table holds about an applied request.
type SessionOutcome struct {
	// Index is the state index after the request's command applied.
	Index uint64
	// AtMS is the leader's time stamped into the command.
	AtMS        int64
	Fingerprint [32]byte
	// Status and Answer are the answer recorded with Session.SetAnswer (Status 0:
	// none; the handler runs again, and its command changes nothing).
	Status int
	Answer []byte
}

// Session returns the outcome this node's state holds for a request key.
// On the leader after [Store.ConsistentRead] it holds every request whose
// command committed.
func (s *Store) Session(key [SessionKeySize]byte) (SessionOutcome, bool, error) {
	f := s.fsm.Load()
	if f == nil {
		return SessionOutcome{}, false, ErrNotOpen
	}
	var out SessionOutcome
	var found bool
	err := f.view(func(tx *bolt.Tx) error {
		idx, err := f.sessionIndexOf(tx)
		if err != nil {
			return err
		}
		ms, ok := idx.get(key)
		if !ok {
			return nil
		}
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return nil
		}
		v := b.Get(sessionTimeKey(ms, key[:]))
		if v == nil {
			// Indexed by an entry still being applied.
			return nil
		}
		rec, err := decodeSessionRecord(ms, v)
		if err != nil {
			return err
		}
		out, found = rec, true
		out.Answer = bytes.Clone(rec.Answer)
		return nil
	})
	return out, found, err
}

// sessionCmd is a command wrapped with its session.
type sessionCmd struct {
	s   *Session
	now time.Time
	cmd Command
}

func (sessionCmd) cmdType() cmdType { return typeSession }

func (c sessionCmd) payload() (any, error) {
	p, err := c.cmd.payload()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.cmd.cmdType(), err)
	}
	return sessionPayload{
		Key: c.s.Key[:], Fingerprint: c.s.Fingerprint[:], NowMS: c.now.UnixMilli(),
		Status: c.s.status, Answer: c.s.answer,
		Command: batchItem{Type: c.cmd.cmdType(), Version: payloadVersion, Payload: raw},
	}, nil
}

// sessionPayload is the payload of a session entry ([]byte fields are
// base64 in JSON).
type sessionPayload struct {
	Key         []byte    `json:"key"`
	Fingerprint []byte    `json:"fp"`
	NowMS       int64     `json:"now_ms"`
	Status      int       `json:"status,omitempty"`
	Answer      []byte    `json:"answer,omitempty"`
	Command     batchItem `json:"command"`
}

// errSessionUsed is the error of a session given to a second command.
var errSessionUsed = errors.New("the session already wrapped a command")

// withSession wraps cmd with sess, when the cluster's feature level is
// that of session entries (level): below it the command goes unwrapped,
// as a master without request ids would submit it. Only the commands a
// request's handler submits take a session, each session once.
func (s *Store) withSession(sess *Session, cmd Command, level int) (Command, error) {
	if sess == nil {
		return cmd, nil
	}
	switch cmd.(type) {
	case ReplaceActive, CreateDraft, EditDraft, TakeOver, Deploy, DeployScoped, DeleteDraft, DraftEdit, PatchFinding,
		deployVersion, Rollback, SetDraftTests, deployTested:
	default:
		// Inserts deduplicate by content; membership, restores and
		// clears are not client requests that forwarding resends.
		return nil, fmt.Errorf("%w: a session with %s", ErrInvalidCommand, cmd.cmdType())
	}
	if level < LevelSessions {
		return cmd, nil
	}
	if !sess.used.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCommand, errSessionUsed)
	}
	if sess.Digest != nil {
		sess.Fingerprint = sess.Digest()
	}
	return sessionCmd{s: sess, now: s.now(), cmd: cmd}, nil
}

// decodeSession decodes a session entry's payload and the command it
// wraps (in decoded.batch, alone).
func decodeSession(version uint8, raw []byte) (decoded, error) {
	if version != payloadVersion {
		return decoded{}, fmt.Errorf("%w: %s version %d (this binary knows %d)", errCorruptEntry, typeSession, version, payloadVersion)
	}
	p := new(sessionPayload)
	// Decoded by every node for every write: segmentio's decoder, as for
	// inserts (TestSession_DecodersAgree checks it against encoding/json).
	if err := fastStrictUnmarshal(raw, p); err != nil {
		return decoded{}, fmt.Errorf("%w: %s: %w", errCorruptEntry, typeSession, err)
	}
	if len(p.Key) != SessionKeySize || len(p.Fingerprint) != 32 {
		return decoded{}, fmt.Errorf("%w: %s: key of %d bytes, fingerprint of %d", errCorruptEntry, typeSession, len(p.Key), len(p.Fingerprint))
	}
	if t := p.Command.Type; t == typeBatch || t == typeSession {
		return decoded{}, fmt.Errorf("%w: %s wraps a %s", errCorruptEntry, typeSession, t)
	}
	inner, err := decodePayload(p.Command.Type, p.Command.Version, p.Command.Payload)
	if err != nil {
		return decoded{}, err
	}
	return decoded{typ: typeSession, p: p, batch: []decoded{inner}}, nil
}

// applySession applies a session entry: the wrapped command unless the
// table holds its key. Expired entries are dropped first, by the entry's
// own time, so every node drops the same ones.
func (f *fsm) applySession(b *bolt.Bucket, st *state, idx uint64, d decoded) (Result, error) {
	p := d.p.(*sessionPayload)
	key := [SessionKeySize]byte(p.Key)
	sb, err := b.Tx().CreateBucketIfNotExists(bucketSessions)
	if err != nil {
		return Result{}, err
	}
	// Keys mostly arrive in order: fill the pages they split off (bbolt's
	// default of one half suits random keys).
	sb.FillPercent = 0.9
	index, err := f.sessionIndexOf(b.Tx())
	if err != nil {
		return Result{}, err
	}
	limit := f.maxSessions
	if err := expireSessions(sb, index, p.NowMS-SessionWindow.Milliseconds(), limit); err != nil {
		return Result{}, err
	}
	if ms, ok := index.get(key); ok {
		v := sb.Get(sessionTimeKey(ms, p.Key))
		if v == nil {
			return Result{}, fmt.Errorf("session %x indexed at %d but not stored", p.Key, ms)
		}
		rec, err := decodeSessionRecord(ms, v)
		if err != nil {
			return Result{}, err
		}
		if !bytes.Equal(rec.Fingerprint[:], p.Fingerprint) {
			f.metrics.fsmCommands.WithLabelValues(typeSession.String(), resultRefused).Inc()
			return Result{Index: st.index, Err: ErrRequestMismatch}, nil
		}
		f.metrics.fsmCommands.WithLabelValues(typeSession.String(), resultReplayed).Inc()
		return Result{Index: st.index, Replayed: true}, nil
	}
	r, err := f.applyCommand(b, st, idx, d.batch[0])
	if err != nil || r.Err != nil {
		// A refused command changed nothing: applying it again later is
		// a first application at that later point, so it is not
		// remembered.
		return r, err
	}
	if err := expireSessions(sb, index, 0, limit-1); err != nil {
		return Result{}, err
	}
	rec := SessionOutcome{Index: r.Index, AtMS: p.NowMS, Status: p.Status, Answer: p.Answer}
	copy(rec.Fingerprint[:], p.Fingerprint)
	if err := sb.Put(sessionTimeKey(p.NowMS, p.Key), encodeSessionRecord(rec)); err != nil {
		return Result{}, err
	}
	index.put(key, p.NowMS)
	return r, nil
}

// resultReplayed labels a session entry whose request was applied before.
const resultReplayed = "replayed"

// expireSessions deletes the entries older than beforeMS, and the oldest
// ones while there are more than max.
func expireSessions(sb *bolt.Bucket, index *sessionIndex, beforeMS int64, max int) error {
	c := sb.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.First() {
		if len(k) != 8+SessionKeySize {
			return fmt.Errorf("session key of %d bytes", len(k))
		}
		if int64(binary.BigEndian.Uint64(k[:8])) >= beforeMS && index.len() <= max {
			return nil
		}
		key := [SessionKeySize]byte(k[8:])
		if err := c.Delete(); err != nil {
			return err
		}
		index.delete(key)
	}
	return nil
}

// sessionTimeKey is an entry's key in the time index: time, then key.
func sessionTimeKey(ms int64, key []byte) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, uint64(ms))
	return append(k, key...)
}

// The stored record: index (8), fingerprint (32), status (2), answer.
const sessionRecordSize = 8 + 32 + 2

func encodeSessionRecord(r SessionOutcome) []byte {
	v := make([]byte, sessionRecordSize, sessionRecordSize+len(r.Answer))
	binary.BigEndian.PutUint64(v[0:], r.Index)
	copy(v[8:40], r.Fingerprint[:])
	binary.BigEndian.PutUint16(v[40:], uint16(r.Status))
	return append(v, r.Answer...)
}

// decodeSessionRecord decodes the record of an entry of time ms; Answer
// aliases v.
func decodeSessionRecord(ms int64, v []byte) (SessionOutcome, error) {
	if len(v) < sessionRecordSize {
		return SessionOutcome{}, fmt.Errorf("session record of %d bytes", len(v))
	}
	r := SessionOutcome{
		Index:  binary.BigEndian.Uint64(v[0:]),
		AtMS:   ms,
		Status: int(binary.BigEndian.Uint16(v[40:])),
	}
	copy(r.Fingerprint[:], v[8:40])
	if len(v) > sessionRecordSize {
		r.Answer = v[sessionRecordSize:]
	}
	return r, nil
}
