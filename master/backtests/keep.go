package backtests

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/master/store"
)

// Keeper keeps backtests in the replicated state (*store.Store). When the
// Trees given to New is one too, the API keeps the backtests there from
// feature level store.LevelBacktests on: a small record when one is asked
// for, the finished backtest with its compressed result when it ends,
// deletions and expiry. Below that level, or without a Keeper, they live
// in the leader's memory only.
type Keeper interface {
	ClusterFeatureLevel() int
	Backtests() ([]store.Backtest, error)
	Backtest(id string) (store.Backtest, error)
	SaveBacktest(ctx context.Context, c store.SaveBacktest) error
	DeleteBacktests(ctx context.Context, c store.DeleteBacktests) error
}

var _ Keeper = (*store.Store)(nil)

// errNotKept: an engine's result is taken, and not yet written into the
// replicated state.
var errNotKept = errors.New("the result is not kept yet")

// LeaderChangedError is the error of a backtest whose record is kept
// unfinished while the leader that ran it is gone.
const LeaderChangedError = "the leader changed while it ran; ask again"

// tendInterval is how often the leader writes what its memory holds of
// finished backtests, fails the backtests a former leader ran, and
// expires the finished ones, when keeping them.
const tendInterval = 2 * time.Second

// keeping reports whether backtests are kept in the replicated state.
func (a *API) keeping() bool {
	return a.keeper != nil && a.keeper.ClusterFeatureLevel() >= store.LevelBacktests
}

// summary is the record of b without its result.
func summary(b Backtest) (json.RawMessage, error) {
	b.Result = nil
	return json.Marshal(b)
}

// keepNew writes the small record of a backtest just asked for.
func (a *API) keepNew(ctx context.Context, b Backtest) error {
	s, err := summary(b)
	if err != nil {
		return err
	}
	err = a.keeper.SaveBacktest(ctx, store.SaveBacktest{
		Backtest: store.Backtest{ID: b.ID, User: b.CreatedBy, CreatedMS: b.CreatedMS, Summary: s},
		MaxKept:  a.cfg.MaxKept, MaxBytes: a.cfg.MaxKeptBytes})
	if errors.Is(err, store.ErrBacktestsFull) {
		return errFull
	}
	return err
}

// packResult returns b's result compressed within
// store.MaxBacktestResultBytes: without the samples' events, then without
// samples, when larger, which b.ResultTrimmed then says.
func packResult(b *Backtest) ([]byte, error) {
	if b.Result == nil {
		return nil, nil
	}
	res := *b.Result
	for step := 0; ; step++ {
		raw, err := json.Marshal(&res)
		if err != nil {
			return nil, err
		}
		packed := store.PackBacktestResult(raw)
		if len(packed) <= store.MaxBacktestResultBytes {
			return packed, nil
		}
		switch step {
		case 0:
			res.Samples = slices.Clone(res.Samples)
			for i := range res.Samples {
				res.Samples[i].Event = nil
			}
			b.ResultTrimmed = fmt.Sprintf("the samples' events were dropped: the result compressed is more than the %d bytes the masters keep of one", store.MaxBacktestResultBytes)
		case 1:
			res.Samples = nil
			b.ResultTrimmed = fmt.Sprintf("the samples were dropped: the result compressed is more than the %d bytes the masters keep of one", store.MaxBacktestResultBytes)
		default:
			return nil, fmt.Errorf("backtest %s: the result compressed is %d bytes without samples, more than %d", b.ID, len(packed), store.MaxBacktestResultBytes)
		}
		b.Result = &res
	}
}

// keepFinished writes a finished backtest of the leader's memory, and
// drops it from memory once written (or once the state says it needs no
// writing: deleted, or finished already), so that clients see it
// finished from then on, read from the replicated state.
func (a *API) keepFinished(ctx context.Context, r finishedRecord) error {
	b := r.view
	packed, err := packResult(&b)
	if err != nil {
		// Kept without a result rather than not at all.
		b.Result, b.ResultTrimmed = nil, err.Error()
	}
	s, err := summary(b)
	if err != nil {
		return err
	}
	err = a.keeper.SaveBacktest(ctx, store.SaveBacktest{
		Backtest: store.Backtest{ID: b.ID, User: b.CreatedBy, CreatedMS: b.CreatedMS, Summary: s, Finished: true,
			FinishedMS: b.FinishedMS, Result: packed},
		Create: !r.stored, MaxKept: a.cfg.MaxKept, MaxBytes: a.cfg.MaxKeptBytes})
	switch {
	case err == nil, errors.Is(err, store.ErrBacktestFinished), errors.Is(err, store.ErrNoBacktest), errors.Is(err, store.ErrBacktestsFull):
		a.reg.drop(b.ID)
		return nil
	}
	return err
}

// persist writes the finished backtests of the leader's memory into the
// replicated state, one writer at a time; it returns the first failure
// (the rest wait for the next persist).
func (a *API) persist(ctx context.Context) error {
	if !a.keeping() {
		return nil
	}
	a.persistMu.Lock()
	defer a.persistMu.Unlock()
	for _, r := range a.reg.finishedRecords(a.cfg.Now()) {
		if err := a.keepFinished(ctx, r); err != nil {
			a.logger.WarnContext(ctx, "a finished backtest is not kept yet; retrying", "id", r.view.ID, "err", err)
			return err
		}
	}
	return nil
}

// tend runs on the leader: it writes the finished backtests of its
// memory, fails those a former leader ran (their record is unfinished and
// this leader does not run them), and expires the finished ones kept
// longer than Keep.
func (a *API) tend(ctx context.Context) {
	if !a.keeping() {
		return
	}
	_ = a.persist(ctx) // logged; the next tend retries
	kept, err := a.keeper.Backtests()
	if err != nil {
		a.logger.WarnContext(ctx, "reading the kept backtests failed", "err", err)
		return
	}
	now := a.cfg.Now()
	expired := false
	for _, k := range kept {
		if k.Finished {
			expired = expired || a.expired(k, now)
			continue
		}
		if a.reg.has(k.ID) {
			continue
		}
		b, err := a.lost(k, now)
		if err == nil {
			s, _ := summary(b)
			err = a.keeper.SaveBacktest(ctx, store.SaveBacktest{
				Backtest: store.Backtest{ID: k.ID, User: k.User, CreatedMS: k.CreatedMS, Summary: s, Finished: true, FinishedMS: b.FinishedMS},
				MaxKept:  a.cfg.MaxKept, MaxBytes: a.cfg.MaxKeptBytes})
		}
		if err != nil && !errors.Is(err, store.ErrBacktestFinished) && !errors.Is(err, store.ErrNoBacktest) {
			a.logger.WarnContext(ctx, "failing a backtest whose leader changed failed", "id", k.ID, "err", err)
			continue
		}
		if err == nil {
			a.logger.InfoContext(ctx, "backtest failed: the leader changed while it ran", "id", k.ID)
		}
	}
	if expired {
		if err := a.keeper.DeleteBacktests(ctx, store.DeleteBacktests{FinishedBeforeMS: now.Add(-a.cfg.Keep).UnixMilli() + 1}); err != nil {
			a.logger.WarnContext(ctx, "expiring backtests failed", "err", err)
		}
	}
}

// expired reports whether a kept finished backtest is older than Keep.
func (a *API) expired(k store.Backtest, now time.Time) bool {
	return k.Finished && now.Sub(time.UnixMilli(k.FinishedMS)) >= a.cfg.Keep
}

// lost is the view of a backtest kept unfinished that this leader does
// not run: failed, since the leader that ran it changed.
func (a *API) lost(k store.Backtest, now time.Time) (Backtest, error) {
	var b Backtest
	if err := json.Unmarshal(k.Summary, &b); err != nil {
		return Backtest{}, fmt.Errorf("backtest %s: %w", k.ID, err)
	}
	b.State, b.Error, b.FinishedMS, b.Progress = StateFailed, LeaderChangedError, now.UnixMilli(), nil
	return b, nil
}

// keptView returns the view of a kept backtest (with its result when
// result is set); errNotFound when it is not kept or expired.
func (a *API) keptView(k store.Backtest, result bool, now time.Time) (Backtest, error) {
	if a.expired(k, now) {
		return Backtest{}, errNotFound
	}
	if !k.Finished {
		return a.lost(k, now)
	}
	var b Backtest
	if err := json.Unmarshal(k.Summary, &b); err != nil {
		return Backtest{}, fmt.Errorf("backtest %s: %w", k.ID, err)
	}
	if !result || len(k.Result) == 0 {
		return b, nil
	}
	raw, err := store.UnpackBacktestResult(k.Result)
	if err != nil {
		return Backtest{}, fmt.Errorf("backtest %s: %w", k.ID, err)
	}
	b.Result = new(backtest.Result)
	if err := json.Unmarshal(raw, b.Result); err != nil {
		return Backtest{}, fmt.Errorf("backtest %s: result: %w", k.ID, err)
	}
	return b, nil
}

// get returns backtest id: from the leader's memory, else from the
// replicated state.
func (a *API) get(id string) (Backtest, error) {
	now := a.cfg.Now()
	b, err := a.reg.get(id, now)
	if !errors.Is(err, errNotFound) || !a.keeping() {
		return b, err
	}
	k, err := a.keeper.Backtest(id)
	if errors.Is(err, store.ErrNoBacktest) {
		return Backtest{}, errNotFound
	}
	if err != nil {
		return Backtest{}, err
	}
	return a.keptView(k, true, now)
}

// list returns the backtests newest first, without results: those of the
// leader's memory and those kept in the replicated state.
func (a *API) list() ([]Backtest, error) {
	now := a.cfg.Now()
	out := a.reg.list(now)
	if !a.keeping() {
		return out, nil
	}
	kept, err := a.keeper.Backtests()
	if err != nil {
		return nil, err
	}
	for _, k := range kept {
		if slices.ContainsFunc(out, func(b Backtest) bool { return b.ID == k.ID }) {
			continue
		}
		b, err := a.keptView(k, false, now)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(x, y Backtest) int { return cmp.Compare(y.CreatedMS, x.CreatedMS) })
	return out, nil
}

// remove deletes backtest id from the leader's memory and the replicated
// state.
func (a *API) remove(ctx context.Context, id string) error {
	err := a.reg.remove(id, a.cfg.Now())
	if !a.keeping() {
		return err
	}
	kerr := a.keeper.DeleteBacktests(ctx, store.DeleteBacktests{ID: id})
	switch {
	case kerr == nil:
		return nil
	case errors.Is(kerr, store.ErrNoBacktest):
		return err // only in memory (asked for below the level), or nowhere
	}
	return kerr
}

// ended wraps errNotFound, from an engine's report, as errEnded when the
// backtest is kept finished (or lost with its leader).
func (a *API) ended(id string, err error) error {
	if !errors.Is(err, errNotFound) || !a.keeping() {
		return err
	}
	k, kerr := a.keeper.Backtest(id)
	if kerr != nil {
		return err
	}
	b, kerr := a.keptView(k, false, a.cfg.Now())
	if kerr != nil {
		return err
	}
	return &endedError{state: b.State, reason: b.Error}
}

// keptAsReported reports whether backtest id is kept finished as rep ends
// it, on rep's engine: the engine posted its result again once it was
// kept.
func (a *API) keptAsReported(id string, rep ResultReport) bool {
	if !a.keeping() {
		return false
	}
	k, err := a.keeper.Backtest(id)
	if err != nil || !k.Finished {
		return false
	}
	var b Backtest
	if err := json.Unmarshal(k.Summary, &b); err != nil {
		return false
	}
	state, msg := outcome(rep, b.CancelRequested)
	return b.Engine == rep.Engine && b.State == state && b.Error == msg
}

// endedError: an engine reports on a backtest that ended without it.
type endedError struct{ state, reason string }

func (e *endedError) Error() string {
	if e.reason == "" {
		return "the backtest is " + e.state
	}
	return fmt.Sprintf("the backtest is %s: %s", e.state, e.reason)
}
