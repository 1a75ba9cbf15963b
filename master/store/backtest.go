package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Kept backtests (docs/decisions.md decision 64). From feature level
// LevelBacktests the leader writes a backtest into the replicated state
// twice: a small record when it is asked for (its id, who, when, and the
// API's summary of the request without the trees), and the finished
// record (state, reason, times, and the result, DEFLATE-compressed) when
// it ends. Progress stays in the leader's memory. Every master thus
// answers a finished backtest, and one whose record is unfinished while
// the leader that ran it is gone is answered failed by the next one,
// which writes it finished.
//
// The store does not read the summaries or the results: they are the
// backtests API's JSON. It keeps the records in bucket "backtests" (id ->
// backtestMeta JSON) and the compressed results in bucket
// "backtest_results" (id -> bytes), and enforces the bounds the entry
// carries when applying it, so that every master prunes alike: at most
// MaxKept records, the oldest finished ones dropped first (a new record
// is refused when every kept one is unfinished), and at most MaxBytes of
// compressed results, the oldest finished ones with a result dropped
// first. Deletion and expiry are entries too (DeleteBacktests), expiry
// with the leader's clock in the entry.

// LevelBacktests is the level from which backtests are kept in the
// replicated state (SaveBacktest and DeleteBacktests entries). Below it
// the backtests API keeps them in the leader's memory only.
const LevelBacktests = 7

// Entry types of the backtests.
const (
	typeSaveBacktest    cmdType = 31
	typeDeleteBacktests cmdType = 32
)

// formatBacktests is the state file format from which it may hold the
// backtests' buckets: a binary that reads only older formats refuses
// such a snapshot.
const formatBacktests = 10

// MaxBacktestResultBytes bounds a backtest's compressed result in an
// entry: the API trims a larger result (the samples' events, then the
// samples) to fit.
const MaxBacktestResultBytes = 1 << 20

// maxBacktestSummaryBytes bounds a record's summary.
const maxBacktestSummaryBytes = 64 << 10

var (
	bucketBacktests       = []byte("backtests")
	bucketBacktestResults = []byte("backtest_results")
)

// ErrNoBacktest means no backtest of that id is kept.
var ErrNoBacktest = errors.New("no such backtest")

// ErrBacktestFinished means the backtest is already finished: it is not
// finished again.
var ErrBacktestFinished = errors.New("the backtest is already finished")

// ErrBacktestsFull means as many backtests as the bound are kept and none
// of them is finished.
var ErrBacktestsFull = errors.New("as many backtests as kept at most are unfinished")

// Backtest is a kept backtest as the store holds it.
type Backtest struct {
	ID        string
	User      string
	CreatedMS int64
	// Summary is the backtests API's JSON of the backtest without its
	// result.
	Summary json.RawMessage
	// Finished says the record is final; FinishedMS is when it finished.
	Finished   bool
	FinishedMS int64
	// Result is the compressed result (PackBacktestResult), nil without
	// one; ResultBytes its length (also set when Result is not read).
	Result      []byte
	ResultBytes int
}

// backtestMeta is the stored record, without the result.
type backtestMeta struct {
	ID          string          `json:"id"`
	Seq         uint64          `json:"seq"`
	User        string          `json:"user"`
	CreatedMS   int64           `json:"created_ms"`
	Summary     json.RawMessage `json:"summary"`
	Finished    bool            `json:"finished,omitempty"`
	FinishedMS  int64           `json:"finished_ms,omitempty"`
	ResultBytes int             `json:"result_bytes,omitempty"`
}

// SaveBacktest keeps a backtest: unfinished when it is asked for (refused
// with ErrInvalidCommand when its id is kept already, ErrBacktestsFull
// when MaxKept unfinished ones are), then finished. Finishing one that is
// not kept is refused with ErrNoBacktest (deleted meanwhile) unless
// Create is set (a backtest asked for below LevelBacktests); finishing a
// finished one is refused with ErrBacktestFinished. MaxKept and MaxBytes
// are the bounds applied with it.
type SaveBacktest struct {
	Backtest Backtest
	Create   bool
	MaxKept  int
	MaxBytes int
}

type saveBacktestPayload struct {
	ID         string          `json:"id"`
	User       string          `json:"user"`
	CreatedMS  int64           `json:"created_ms"`
	Summary    json.RawMessage `json:"summary"`
	Finished   bool            `json:"finished,omitempty"`
	FinishedMS int64           `json:"finished_ms,omitempty"`
	Result     []byte          `json:"result,omitempty"`
	Create     bool            `json:"create,omitempty"`
	MaxKept    int             `json:"max_kept"`
	MaxBytes   int             `json:"max_bytes"`
}

// DeleteBacktests deletes backtest ID or, without one, every finished
// backtest that finished before FinishedBeforeMS (expiry: the leader's
// clock minus the time they are kept). Deleting an unknown id is refused
// with ErrNoBacktest.
type DeleteBacktests struct {
	ID               string
	FinishedBeforeMS int64
}

type deleteBacktestsPayload struct {
	ID               string `json:"id,omitempty"`
	FinishedBeforeMS int64  `json:"finished_before_ms,omitempty"`
}

var (
	_ Command = SaveBacktest{}
	_ Command = DeleteBacktests{}
)

func (SaveBacktest) cmdType() cmdType    { return typeSaveBacktest }
func (DeleteBacktests) cmdType() cmdType { return typeDeleteBacktests }

func (c SaveBacktest) payload() (any, error) {
	b := c.Backtest
	p := &saveBacktestPayload{ID: b.ID, User: b.User, CreatedMS: b.CreatedMS, Summary: b.Summary, Finished: b.Finished,
		FinishedMS: b.FinishedMS, Result: b.Result, Create: c.Create, MaxKept: c.MaxKept, MaxBytes: c.MaxBytes}
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *saveBacktestPayload) check() error {
	switch {
	case p.ID == "" || len(p.ID) > 128:
		return fmt.Errorf("%w: save backtest: id %q", ErrInvalidCommand, p.ID)
	case p.User == "" || p.CreatedMS <= 0:
		return fmt.Errorf("%w: save backtest %s: no user or creation time", ErrInvalidCommand, p.ID)
	case len(p.Summary) == 0 || len(p.Summary) > maxBacktestSummaryBytes || !json.Valid(p.Summary):
		return fmt.Errorf("%w: save backtest %s: the summary is not JSON of at most %d bytes", ErrInvalidCommand, p.ID, maxBacktestSummaryBytes)
	case p.Finished && p.FinishedMS <= 0:
		return fmt.Errorf("%w: save backtest %s: finished without a time", ErrInvalidCommand, p.ID)
	case !p.Finished && (len(p.Result) > 0 || p.Create):
		return fmt.Errorf("%w: save backtest %s: a result or create without finished", ErrInvalidCommand, p.ID)
	case len(p.Result) > MaxBacktestResultBytes:
		return fmt.Errorf("%w: save backtest %s: result of %d bytes, more than %d", ErrInvalidCommand, p.ID, len(p.Result), MaxBacktestResultBytes)
	case p.MaxKept < 1 || p.MaxBytes < 0:
		return fmt.Errorf("%w: save backtest %s: bounds %d, %d", ErrInvalidCommand, p.ID, p.MaxKept, p.MaxBytes)
	}
	return nil
}

func (c DeleteBacktests) payload() (any, error) {
	if (c.ID == "") == (c.FinishedBeforeMS <= 0) {
		return nil, fmt.Errorf("%w: delete backtests: give an id or a time", ErrInvalidCommand)
	}
	return &deleteBacktestsPayload{ID: c.ID, FinishedBeforeMS: c.FinishedBeforeMS}, nil
}

// backtestBuckets returns the buckets, creating them when create is set
// (nil, nil when they do not exist and create is not).
func backtestBuckets(tx *bolt.Tx, create bool) (metas, results *bolt.Bucket, err error) {
	metas, results = tx.Bucket(bucketBacktests), tx.Bucket(bucketBacktestResults)
	if metas != nil && results != nil || !create {
		return metas, results, nil
	}
	if err := raiseFormat(tx, formatBacktests); err != nil {
		return nil, nil, err
	}
	if metas, err = tx.CreateBucketIfNotExists(bucketBacktests); err != nil {
		return nil, nil, err
	}
	results, err = tx.CreateBucketIfNotExists(bucketBacktestResults)
	return metas, results, err
}

// readMetas returns the records of metas in the order they were asked
// for.
func readMetas(metas *bolt.Bucket) ([]backtestMeta, error) {
	var out []backtestMeta
	if metas == nil {
		return nil, nil
	}
	err := metas.ForEach(func(k, v []byte) error {
		var m backtestMeta
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("backtest %q: %w", k, err)
		}
		out = append(out, m)
		return nil
	})
	slices.SortFunc(out, func(a, b backtestMeta) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// deleteBacktest deletes the record and result of id.
func deleteBacktest(metas, results *bolt.Bucket, id string) error {
	if err := metas.Delete([]byte(id)); err != nil {
		return err
	}
	return results.Delete([]byte(id))
}

// applySaveBacktest applies a SaveBacktest entry: changed says the state
// changed, refused is a refusal, err a failed write.
func applySaveBacktest(tx *bolt.Tx, p *saveBacktestPayload) (changed bool, refused, err error) {
	if refused := p.check(); refused != nil {
		return false, refused, nil
	}
	metas, results, err := backtestBuckets(tx, false)
	if err != nil {
		return false, nil, err
	}
	all, err := readMetas(metas)
	if err != nil {
		return false, nil, err
	}
	i := slices.IndexFunc(all, func(m backtestMeta) bool { return m.ID == p.ID })
	switch {
	case !p.Finished && i >= 0:
		return false, fmt.Errorf("%w: backtest %s is kept already", ErrInvalidCommand, p.ID), nil
	case p.Finished && i >= 0 && all[i].Finished:
		return false, fmt.Errorf("backtest %s: %w", p.ID, ErrBacktestFinished), nil
	case p.Finished && i < 0 && !p.Create:
		return false, fmt.Errorf("backtest %s: %w", p.ID, ErrNoBacktest), nil
	}
	// The records that may make room: finished ones, oldest first.
	var drop []backtestMeta
	kept := len(all)
	if i < 0 {
		kept++
		for _, m := range all {
			if kept <= p.MaxKept {
				break
			}
			if m.Finished {
				drop = append(drop, m)
				kept--
			}
		}
		if kept > p.MaxKept {
			return false, fmt.Errorf("backtest %s: %w (%d)", p.ID, ErrBacktestsFull, p.MaxKept), nil
		}
	}
	if metas == nil {
		if metas, results, err = backtestBuckets(tx, true); err != nil {
			return false, nil, err
		}
	}
	// The results' bytes, this one's counted instead of what it had.
	total := len(p.Result)
	for _, m := range all {
		if m.ID != p.ID && !slices.ContainsFunc(drop, func(d backtestMeta) bool { return d.ID == m.ID }) {
			total += m.ResultBytes
		}
	}
	for _, m := range all {
		if total <= p.MaxBytes {
			break
		}
		if m.ID != p.ID && m.Finished && m.ResultBytes > 0 && !slices.ContainsFunc(drop, func(d backtestMeta) bool { return d.ID == m.ID }) {
			drop = append(drop, m)
			total -= m.ResultBytes
		}
	}
	for _, m := range drop {
		if err := deleteBacktest(metas, results, m.ID); err != nil {
			return false, nil, err
		}
	}
	m := backtestMeta{ID: p.ID, User: p.User, CreatedMS: p.CreatedMS, Summary: p.Summary, Finished: p.Finished,
		FinishedMS: p.FinishedMS, ResultBytes: len(p.Result)}
	if i >= 0 {
		m.Seq = all[i].Seq
	} else if m.Seq, err = metas.NextSequence(); err != nil {
		return false, nil, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return false, nil, err
	}
	if err := metas.Put([]byte(p.ID), raw); err != nil {
		return false, nil, err
	}
	if len(p.Result) > 0 {
		err = results.Put([]byte(p.ID), p.Result)
	}
	return true, nil, err
}

// applyDeleteBacktests applies a DeleteBacktests entry.
func applyDeleteBacktests(tx *bolt.Tx, p *deleteBacktestsPayload) (changed bool, refused, err error) {
	metas, results, err := backtestBuckets(tx, false)
	if err != nil {
		return false, nil, err
	}
	if p.ID != "" {
		if metas == nil || metas.Get([]byte(p.ID)) == nil {
			return false, fmt.Errorf("backtest %s: %w", p.ID, ErrNoBacktest), nil
		}
		return true, nil, deleteBacktest(metas, results, p.ID)
	}
	all, err := readMetas(metas)
	if err != nil {
		return false, nil, err
	}
	for _, m := range all {
		if m.Finished && m.FinishedMS < p.FinishedBeforeMS {
			if err := deleteBacktest(metas, results, m.ID); err != nil {
				return false, nil, err
			}
			changed = true
		}
	}
	return changed, nil, nil
}

// Backtests returns the kept backtests in the order they were asked for,
// without their results (ResultBytes is set).
func (s *Store) Backtests() ([]Backtest, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	var out []Backtest
	err := f.view(func(tx *bolt.Tx) error {
		metas, _, err := backtestBuckets(tx, false)
		if err != nil {
			return err
		}
		all, err := readMetas(metas)
		for _, m := range all {
			out = append(out, m.backtest())
		}
		return err
	})
	return out, err
}

// Backtest returns kept backtest id with its result; ErrNoBacktest when
// none is kept.
func (s *Store) Backtest(id string) (Backtest, error) {
	f := s.fsm.Load()
	if f == nil {
		return Backtest{}, ErrNotOpen
	}
	var b Backtest
	err := f.view(func(tx *bolt.Tx) error {
		metas, results, err := backtestBuckets(tx, false)
		if err != nil {
			return err
		}
		var raw []byte
		if metas != nil {
			raw = metas.Get([]byte(id))
		}
		if raw == nil {
			return fmt.Errorf("backtest %s: %w", id, ErrNoBacktest)
		}
		var m backtestMeta
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("backtest %q: %w", id, err)
		}
		b = m.backtest()
		if r := results.Get([]byte(id)); r != nil {
			b.Result = slices.Clone(r)
		}
		return nil
	})
	return b, err
}

func (m backtestMeta) backtest() Backtest {
	return Backtest{ID: m.ID, User: m.User, CreatedMS: m.CreatedMS, Summary: m.Summary, Finished: m.Finished,
		FinishedMS: m.FinishedMS, ResultBytes: m.ResultBytes}
}

// SaveBacktest applies c (see [SaveBacktest]); refusals are the errors.
// It needs LevelBacktests on every master (ErrLevel).
func (s *Store) SaveBacktest(ctx context.Context, c SaveBacktest) error {
	_, err := s.do(ctx, nil, c)
	return err
}

// DeleteBacktests applies c (see [DeleteBacktests]); refusals are the
// errors. It needs LevelBacktests on every master (ErrLevel).
func (s *Store) DeleteBacktests(ctx context.Context, c DeleteBacktests) error {
	_, err := s.do(ctx, nil, c)
	return err
}

// PackBacktestResult compresses a result's JSON (DEFLATE, as the version
// trees are stored).
func PackBacktestResult(raw []byte) []byte { return packTree(raw) }

// UnpackBacktestResult returns the JSON of a compressed result.
func UnpackBacktestResult(packed []byte) ([]byte, error) { return unpackTree(packed) }
