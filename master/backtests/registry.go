package backtests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of the registry.
var (
	errNotFound = errors.New("no such backtest")
	// errNotClaimer: a progress or result from an engine that does not
	// run the backtest (any more).
	errNotClaimer = errors.New("this engine does not run the backtest")
	// errFull: MaxKept backtests are pending or running.
	errFull = errors.New("too many backtests pending or running")
	// errFinished: cancel of a finished backtest.
	errFinished = errors.New("the backtest is finished")
)

// record is a kept backtest: what the API shows, the trees it compares
// (until it finishes) and who runs it.
type record struct {
	Backtest
	active, candidate json.RawMessage
	// engineUser is the token user of the engine that claimed it; lease
	// is when the backtest is taken back from an engine that has not
	// reported since.
	engineUser string
	lease      time.Time
	// pendingSince is when it became pending (again).
	pendingSince time.Time
	resultSize   int
	// stored: its record is kept in the replicated state (Keeper).
	stored bool
	// shown, once it finished while the backtests are kept in the
	// replicated state, is what clients see of it until its finished
	// record is written there: the backtest as it was just before it
	// finished (pending or running). A client thus never sees a finished
	// state that a change of leader could take back.
	shown *Backtest
	// reported: its engine's result was taken (finish).
	reported bool
}

// registry keeps the backtests of the leader, in creation order.
type registry struct {
	cfg Config
	// keeping reports whether the finished backtests are kept in the
	// replicated state: a backtest that finishes then keeps its shown
	// view until it is written there.
	keeping func() bool

	mu   sync.Mutex
	recs []*record
	wake chan struct{} // closed when a backtest becomes pending
}

func newRegistry(cfg Config, keeping func() bool) *registry {
	return &registry{cfg: cfg, keeping: keeping, wake: make(chan struct{})}
}

// find returns the record of id; mu held.
func (g *registry) find(id string) (int, *record) {
	for i, r := range g.recs {
		if r.ID == id {
			return i, r
		}
	}
	return -1, nil
}

// wakeLocked tells the claims waiting that a backtest is pending.
func (g *registry) wakeLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// add keeps a new pending backtest, making room by dropping the oldest
// finished ones (not those still to write), and returns its view.
func (g *registry) add(r *record, now time.Time) (Backtest, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	for len(g.recs) >= g.cfg.MaxKept {
		i := slices.IndexFunc(g.recs, func(r *record) bool { return finished(r.State) && r.shown == nil })
		if i < 0 {
			return Backtest{}, errFull
		}
		g.recs = slices.Delete(g.recs, i, i+1)
	}
	r.State, r.pendingSince = StatePending, now
	g.recs = append(g.recs, r)
	g.wakeLocked()
	return r.view(false), nil
}

func finished(state string) bool {
	return state == StateSucceeded || state == StateFailed || state == StateCancelled
}

// sweepLocked takes running backtests back from engines whose lease
// passed, fails those pending too long, and drops those finished for
// longer than Keep (not those still to write).
func (g *registry) sweepLocked(now time.Time) {
	requeued := false
	g.recs = slices.DeleteFunc(g.recs, func(r *record) bool {
		switch r.State {
		case StateRunning:
			if now.Before(r.lease) {
				return false
			}
			lost := fmt.Sprintf("engine %q stopped reporting its progress for %s", r.Engine, g.cfg.LeaseTimeout)
			switch {
			case r.CancelRequested:
				g.finishLocked(r, StateCancelled, lost, now)
			case r.Attempts >= g.cfg.MaxAttempts:
				g.finishLocked(r, StateFailed, fmt.Sprintf("%s (attempt %d of %d)", lost, r.Attempts, g.cfg.MaxAttempts), now)
			default:
				// Another engine runs it again from the start.
				r.State, r.Engine, r.engineUser, r.Progress, r.StartedMS = StatePending, "", "", nil, 0
				r.pendingSince = now
				r.Error = lost + "; pending again for another engine"
				requeued = true
			}
		case StatePending:
			if now.Sub(r.pendingSince) >= g.cfg.PendingTimeout {
				g.finishLocked(r, StateFailed, fmt.Sprintf("no engine claimed it within %s: are engines running with --backtest-max-running above 0?", g.cfg.PendingTimeout), now)
			}
		default:
			return r.shown == nil && now.Sub(time.UnixMilli(r.FinishedMS)) >= g.cfg.Keep
		}
		return false
	})
	if requeued {
		g.wakeLocked()
	}
}

// finishLocked ends r in state with msg as its error (if any). While the
// backtests are kept in the replicated state, clients see r as it was
// until its finished record is written there (shown).
func (g *registry) finishLocked(r *record, state, msg string, now time.Time) {
	if g.keeping() {
		shown := r.snapshot(false)
		r.shown = &shown
	}
	r.State, r.FinishedMS, r.active, r.candidate = state, now.UnixMilli(), nil, nil
	if msg != "" {
		r.Error = msg
	}
}

// claim gives the oldest pending backtest to engine, waiting for one until
// ctx ends (then nil, nil).
func (g *registry) claim(ctx context.Context, engine, user string, now func() time.Time) (*Assignment, error) {
	for {
		g.mu.Lock()
		t := now()
		g.sweepLocked(t)
		for _, r := range g.recs {
			if r.State != StatePending {
				continue
			}
			r.State, r.Engine, r.engineUser = StateRunning, engine, user
			r.Attempts++
			r.StartedMS = t.UnixMilli()
			r.lease = t.Add(g.cfg.LeaseTimeout)
			r.Progress = &Progress{}
			a := &Assignment{ID: r.ID, Active: r.active, Candidate: r.candidate, Range: r.Range, Sample: r.Sample, MaxEvents: r.MaxEvents}
			g.mu.Unlock()
			return a, nil
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil
		case <-wake:
		}
	}
}

// running returns the running record of id that engine (with user's
// token) claimed; mu held.
func (g *registry) running(id, engine, user string) (*record, error) {
	_, r := g.find(id)
	switch {
	case r == nil:
		return nil, errNotFound
	case r.State != StateRunning || r.Engine != engine || r.engineUser != user:
		return nil, errNotClaimer
	}
	return r, nil
}

// progress records an engine's progress, extends its lease and says
// whether it should stop.
func (g *registry) progress(id, engine, user string, p Progress, now time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	r, err := g.running(id, engine, user)
	if err != nil {
		return false, err
	}
	r.Progress = &p
	r.lease = now.Add(g.cfg.LeaseTimeout)
	return r.CancelRequested, nil
}

// finish records an engine's result. The engine's result posted again
// while its finished record is still to write is taken already (nil).
func (g *registry) finish(id, engine, user string, rep ResultReport, size int, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	if _, r := g.find(id); r != nil && r.shown != nil && r.reported && r.Engine == engine && r.engineUser == user {
		return nil
	}
	r, err := g.running(id, engine, user)
	if err != nil {
		return err
	}
	if rep.Release && !r.CancelRequested && r.Attempts < g.cfg.MaxAttempts {
		// The engine stops: another one runs it from the start.
		r.State, r.Engine, r.engineUser, r.Progress, r.StartedMS, r.pendingSince = StatePending, "", "", nil, 0, now
		r.Error = fmt.Sprintf("engine %q stopped while it ran the backtest (%s); pending again for another engine", engine, rep.Error)
		g.wakeLocked()
		return nil
	}
	r.Result, r.resultSize, r.reported = rep.Result, size, true
	g.makeRoomLocked(r)
	if res := rep.Result; res != nil {
		total := res.Events
		if !res.Complete && r.Progress != nil {
			total = max(total, r.Progress.Total)
		}
		r.Progress = &Progress{Read: res.Events, Total: total, Rate: res.Rate, ElapsedMS: res.Elapsed.Milliseconds()}
	}
	state, msg := outcome(rep, r.CancelRequested)
	g.finishLocked(r, state, msg, now)
	if state != StateFailed {
		r.Error = ""
	}
	return nil
}

// outcome is the state, and the error when it failed, that an engine's
// result ends a backtest in.
func outcome(rep ResultReport, cancelRequested bool) (state, msg string) {
	switch {
	case cancelRequested:
		return StateCancelled, ""
	case rep.Error != "":
		return StateFailed, rep.Error
	case rep.Result == nil || !rep.Result.Complete:
		return StateFailed, "the engine posted no complete result"
	}
	return StateSucceeded, ""
}

// cancel cancels a pending backtest at once, and asks the engine of a
// running one to stop. One finished but still to write is answered as
// clients see it.
func (g *registry) cancel(id string, now time.Time) (Backtest, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	_, r := g.find(id)
	switch {
	case r == nil:
		return Backtest{}, errNotFound
	case r.shown != nil:
	case r.State == StatePending:
		g.finishLocked(r, StateCancelled, "cancelled before an engine claimed it", now)
		if r.shown != nil {
			r.shown.CancelRequested = true
		}
	case r.State == StateRunning:
		r.CancelRequested = true
	default:
		return Backtest{}, errFinished
	}
	return r.view(false), nil
}

// remove forgets a backtest; a running one's engine is told to stop at
// its next report (the backtest is unknown).
func (g *registry) remove(id string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	i, _ := g.find(id)
	if i < 0 {
		return errNotFound
	}
	g.recs = slices.Delete(g.recs, i, i+1)
	return nil
}

// get returns a backtest with its result.
func (g *registry) get(id string, now time.Time) (Backtest, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	_, r := g.find(id)
	if r == nil {
		return Backtest{}, errNotFound
	}
	return r.view(true), nil
}

// list returns the backtests, newest first, without results.
func (g *registry) list(now time.Time) []Backtest {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	out := make([]Backtest, 0, len(g.recs))
	for i := len(g.recs) - 1; i >= 0; i-- {
		out = append(out, g.recs[i].view(false))
	}
	return out
}

// view is what the API shows of r: shown while it is still to write,
// else a snapshot.
func (r *record) view(result bool) Backtest {
	if r.shown != nil {
		b := *r.shown
		b.Progress = copyProgress(b.Progress)
		return b
	}
	return r.snapshot(result)
}

// snapshot is a copy of r's backtest (the result is never modified once
// set, so it is shared).
func (r *record) snapshot(result bool) Backtest {
	b := r.Backtest
	b.Progress = copyProgress(b.Progress)
	if !result {
		b.Result = nil
	}
	return b
}

func copyProgress(p *Progress) *Progress {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// makeRoomLocked drops the oldest finished backtests but keep (and those
// still to write) while the results kept are over MaxKeptBytes.
func (g *registry) makeRoomLocked(keep *record) {
	total := 0
	for _, r := range g.recs {
		total += r.resultSize
	}
	for total > g.cfg.MaxKeptBytes {
		i := slices.IndexFunc(g.recs, func(r *record) bool { return r != keep && finished(r.State) && r.shown == nil && r.resultSize > 0 })
		if i < 0 {
			return
		}
		total -= g.recs[i].resultSize
		g.recs = slices.Delete(g.recs, i, i+1)
	}
}

// finishedRecord is a finished backtest of the leader's memory, to keep
// in the replicated state.
type finishedRecord struct {
	view   Backtest
	stored bool
}

// finishedRecords returns the finished backtests, oldest first, with
// their results.
func (g *registry) finishedRecords(now time.Time) []finishedRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	var out []finishedRecord
	for _, r := range g.recs {
		if finished(r.State) {
			out = append(out, finishedRecord{view: r.snapshot(true), stored: r.stored})
		}
	}
	return out
}

// markStored records that id's record is kept in the replicated state.
func (g *registry) markStored(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, r := g.find(id); r != nil {
		r.stored = true
	}
}

// has reports whether the leader's memory holds id.
func (g *registry) has(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i, _ := g.find(id)
	return i >= 0
}

// drop forgets a finished backtest (kept in the replicated state).
func (g *registry) drop(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i, r := g.find(id); r != nil && finished(r.State) {
		g.recs = slices.Delete(g.recs, i, i+1)
	}
}

// forget drops every backtest and returns how many there were.
func (g *registry) forget() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.recs)
	g.recs = nil
	return n
}
