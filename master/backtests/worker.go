package backtests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/master/fleet"
)

// WorkerConfig configures a [Worker].
type WorkerConfig struct {
	// MasterURLs are the masters' base URLs; any of them takes the
	// requests (followers forward to the leader).
	MasterURLs []string
	// Token needs fleet_report on the root.
	Token string
	// Client sends the requests; nil is a plain client.
	Client *http.Client
	// Engine is the engine's id, as in the fleet list.
	Engine string
	// Topic is the events topic; Reader reads it outside any consumer
	// group.
	Topic  string
	Reader backtest.Reader
	// MaxRunning is how many backtests the engine runs at once (default
	// 1).
	MaxRunning int
	// Rate bounds the events per second of each backtest (0: none); CPU
	// its share of one core (0 or 1: one core).
	Rate float64
	CPU  float64
	// Lag, when set, reads the engine's consumer lag (false: unknown);
	// a backtest is held, between two chunks of events, while the lag is
	// more than MaxLagGrowth above its lowest since the backtest started
	// (0: never held), so that the live pipeline keeps priority.
	Lag          func() (int64, bool)
	MaxLagGrowth int64
	// ProgressInterval is the time between two progress reports (default
	// 1s); it must be well under the masters' lease (30s).
	ProgressInterval time.Duration
	// ClaimWait is how long a claim waits on the masters (default
	// DefaultClaimWait).
	ClaimWait time.Duration
	// MaxResultBytes bounds the result posted (default
	// DefaultMaxResultBytes, the masters' default): a larger one is
	// posted without its samples' events, then without samples.
	MaxResultBytes int
	// Logger receives the worker's logs; nil discards them.
	Logger *slog.Logger
}

// Worker claims backtests from the masters and runs them.
type Worker struct {
	cfg WorkerConfig
	log *slog.Logger
	caller
}

// NewWorker checks cfg and returns a worker. It starts nothing.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	errs := fleet.CheckMasterURLs(cfg.MasterURLs)
	if cfg.Token == "" || cfg.Topic == "" || cfg.Reader == nil || !idPattern.MatchString(cfg.Engine) {
		errs = append(errs, errors.New("a token, a topic, a reader and an engine id are required"))
	}
	if cfg.MaxRunning < 0 || cfg.Rate < 0 || cfg.CPU < 0 || cfg.CPU > 1 || cfg.MaxLagGrowth < 0 {
		errs = append(errs, fmt.Errorf("max running %d, rate %g: want 0 or more; cpu %g: want a share of one core, 0 to 1", cfg.MaxRunning, cfg.Rate, cfg.CPU))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("backtest worker: %w", errors.Join(errs...))
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = 1
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = DefaultClaimWait
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for i, u := range cfg.MasterURLs {
		cfg.MasterURLs[i] = strings.TrimRight(u, "/")
	}
	return &Worker{cfg: cfg, log: cfg.Logger.With("component", "backtest-worker"),
		caller: caller{urls: cfg.MasterURLs, token: cfg.Token, client: cfg.Client}}, nil
}

// Run claims and runs backtests, MaxRunning at a time, until ctx ends; a
// backtest running then is stopped and its partial result posted. It
// returns nil.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range w.cfg.MaxRunning {
		wg.Go(func() { w.slot(ctx) })
	}
	wg.Wait()
	return nil
}

// slot claims a backtest, runs it, and claims the next.
func (w *Worker) slot(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		as, err := w.claim(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := min(time.Second<<min(failures-1, 5), 30*time.Second)
			switch {
			case isStatus(err, http.StatusUnauthorized) || isStatus(err, http.StatusForbidden) || isStatus(err, http.StatusNotFound):
				// Refused, or masters of a release without backtests:
				// no use asking often.
				wait = refusedClaimWait
				if failures == 1 {
					w.log.Warn("the masters refuse this engine's backtest claims: it runs none until they accept them (the token needs view and fleet_report on the root; --backtest-max-running 0 stops asking)",
						"err", err, "retry_in", wait.String())
				}
			case failures == 1 || failures%10 == 0:
				w.log.Warn("claiming a backtest failed on every master", "err", err, "failures", failures, "retry_in", wait.String())
			}
			if !sleep.For(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		if as != nil {
			w.run(ctx, as)
		}
	}
}

// refusedClaimWait is the wait after the masters refused a claim (401,
// 403, or 404 from masters without backtests).
const refusedClaimWait = 5 * time.Minute

// claim asks the masters for a backtest: nil when none came in ClaimWait.
func (w *Worker) claim(ctx context.Context) (*Assignment, error) {
	var as Assignment
	path := fmt.Sprintf("%s?wait=%d", ClaimPath, int(w.cfg.ClaimWait/time.Second))
	status, err := w.call(ctx, w.cfg.ClaimWait+10*time.Second, http.MethodPost, path, Claim{Engine: w.cfg.Engine}, &as)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &as, nil
}

// run runs an assigned backtest, reporting its progress, and posts its
// result.
func (w *Worker) run(ctx context.Context, as *Assignment) {
	log := w.log.With("backtest", as.ID)
	bt, err := w.build(as)
	if err != nil {
		log.Warn("backtest refused", "err", err)
		w.post(ctx, as.ID, ResultReport{Engine: w.cfg.Engine, Error: err.Error()})
		return
	}
	log.Info("backtest started", "range", as.Range, "max_events", as.MaxEvents)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		res *backtest.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := bt.Run(runCtx)
		done <- outcome{res, err}
	}()
	tick := time.NewTicker(w.cfg.ProgressInterval)
	defer tick.Stop()
	lost, cancelled := false, false
	for {
		select {
		case out := <-done:
			if lost {
				log.Info("backtest stopped: the masters no longer know it on this engine")
				return
			}
			rep := ResultReport{Engine: w.cfg.Engine, Result: out.res}
			switch {
			case out.err != nil && cancelled:
			case out.err != nil && ctx.Err() != nil:
				rep.Error, rep.Release = "the engine stopped", true
			case out.err != nil:
				rep.Error = out.err.Error()
			}
			log.Info("backtest finished", "events", eventsOf(out.res), "err", rep.Error, "cancelled", cancelled)
			w.post(ctx, as.ID, rep)
			return
		case <-tick.C:
			p := bt.Progress()
			var ans ProgressAnswer
			status, err := w.call(ctx, 5*time.Second, http.MethodPut, Prefix+"/"+url.PathEscape(as.ID)+"/progress",
				ProgressReport{Engine: w.cfg.Engine, Progress: Progress{Read: p.Read, Total: p.Total, Rate: p.Rate, ElapsedMS: p.Elapsed.Milliseconds(), Held: p.Held}}, &ans)
			switch {
			case status == http.StatusNotFound || status == http.StatusConflict:
				// Deleted, taken back, or kept by a leader that changed.
				lost = true
				cancel()
			case err != nil:
				// The next report may go through; the masters' lease
				// is 30 reports long.
				log.Debug("progress report failed", "err", err)
			case ans.Cancel && !cancelled:
				cancelled = true
				cancel()
			}
		}
	}
}

func eventsOf(r *backtest.Result) int64 {
	if r == nil {
		return 0
	}
	return r.Events
}

// build decodes an assignment into a backtest with the engine's bounds.
func (w *Worker) build(as *Assignment) (*backtest.Backtest, error) {
	active, err := config.DecodeExport(as.Active)
	if err != nil {
		return nil, fmt.Errorf("active tree: %w", err)
	}
	candidate, err := config.DecodeExport(as.Candidate)
	if err != nil {
		return nil, fmt.Errorf("candidate tree: %w", err)
	}
	r := backtest.Range{Last: as.Range.Last}
	if as.Range.Since != nil {
		r.Since = *as.Range.Since
	}
	if as.Range.Until != nil {
		r.Until = *as.Range.Until
	}
	sample := as.Sample
	if sample == 0 {
		sample = -1 // none
	}
	return backtest.New(w.cfg.Reader, backtest.Spec{Active: active.Node, Candidate: candidate.Node, Topic: w.cfg.Topic, Range: r,
		MaxEvents: as.MaxEvents, Sample: sample, Rate: w.cfg.Rate, CPU: w.cfg.CPU, Hold: w.lagGuard()})
}

// lagHoldPoll is how often a held backtest reads the lag again.
const lagHoldPoll = 100 * time.Millisecond

// lagGuard returns the Hold of a backtest: it waits while the consumer
// lag is more than MaxLagGrowth above the lowest lag seen since the
// backtest started. An unknown lag holds nothing.
func (w *Worker) lagGuard() func(context.Context) error {
	if w.cfg.Lag == nil || w.cfg.MaxLagGrowth <= 0 {
		return nil
	}
	low, known := w.cfg.Lag()
	return func(ctx context.Context) error {
		for {
			lag, ok := w.cfg.Lag()
			switch {
			case !ok:
				return nil
			case !known || lag < low:
				low, known = lag, true
			}
			if lag <= low+w.cfg.MaxLagGrowth {
				return nil
			}
			if !sleep.For(ctx, lagHoldPoll) {
				return ctx.Err()
			}
		}
	}
}

// post sends a result, trimmed to MaxResultBytes, trying for at most a
// minute (the masters' lease is 30s: past it the backtest is theirs
// again).
func (w *Worker) post(ctx context.Context, id string, rep ResultReport) {
	body, err := w.fit(rep)
	if err != nil {
		w.log.Error("backtest result not encoded", "backtest", id, "err", err)
		return
	}
	// The engine may be stopping: the result still goes out, briefly.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for attempt := 1; ; attempt++ {
		status, err := w.call(pctx, 30*time.Second, http.MethodPut, Prefix+"/"+url.PathEscape(id)+"/result", json.RawMessage(body), nil)
		switch {
		case err == nil:
			return
		case status == http.StatusNotFound || status == http.StatusConflict || status == http.StatusRequestEntityTooLarge || status == http.StatusBadRequest:
			w.log.Warn("backtest result refused", "backtest", id, "err", err)
			return
		case ctx.Err() != nil && attempt >= 2:
			w.log.Warn("backtest result not delivered before the engine stopped", "backtest", id, "err", err)
			return
		}
		if !sleep.For(pctx, time.Duration(attempt)*time.Second) {
			w.log.Warn("backtest result not delivered", "backtest", id, "err", err)
			return
		}
	}
}

// fit encodes rep within MaxResultBytes: without the samples' events,
// then without samples, when it is larger. An error longer than the
// masters take is cut.
func (w *Worker) fit(rep ResultReport) ([]byte, error) {
	if len(rep.Error) > maxErrorBytes {
		rep.Error = strings.ToValidUTF8(rep.Error[:maxErrorBytes-len("…")], "") + "…"
	}
	b, err := json.Marshal(rep)
	if err != nil || len(b) <= w.cfg.MaxResultBytes || rep.Result == nil {
		return b, err
	}
	res := *rep.Result
	res.Samples = append([]backtest.Sample(nil), res.Samples...)
	for i := range res.Samples {
		res.Samples[i].Event = nil
	}
	rep.Result = &res
	if b, err = json.Marshal(rep); err != nil || len(b) <= w.cfg.MaxResultBytes {
		return b, err
	}
	res.Samples = nil
	return json.Marshal(rep)
}
