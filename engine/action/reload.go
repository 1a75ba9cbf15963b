package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/metricset"
)

// Defaults of [ReloaderConfig].
const (
	DefaultReloadDebounce       = 200 * time.Millisecond
	DefaultReloadRescanInterval = 30 * time.Second
)

// ReloaderConfig says where a [Reloader] reads its settings.
type ReloaderConfig struct {
	// File is the actions settings file (--actions-config). Empty: the
	// settings are Settings, or [Default] when Settings is nil, and
	// nothing is watched.
	File string
	// Settings are fixed settings, used when File is empty (squall dev
	// builds its engine's settings so).
	Settings *Config
	// Debounce is how long the file's directory must be quiet after a
	// change before the file is read (default 200 ms); a stream of
	// changes is read at least every 5×Debounce.
	Debounce time.Duration
	// RescanInterval is the period of the safety-net read, which catches
	// changes no event reported (default 30 s; negative disables it).
	RescanInterval time.Duration
}

// Reloader runs actions through a [Registry] that it rebuilds when its
// settings file changes ([Reloader.Watch]) or when asked to
// ([Reloader.Reload], on SIGHUP). A reload builds a complete new registry
// first; if the file is bad (unreadable, invalid, a secret file missing)
// the reason is logged and the current registry stays. A registry that
// was replaced is closed once the actions that were running on it have
// finished: an executor is never closed in the middle of an action.
// Build it with [NewReloader]; it is safe for concurrent use.
type Reloader struct {
	cfg  ReloaderConfig
	deps Deps
	log  *slog.Logger
	m    *metrics
	rm   *reloadMetrics

	cur    atomic.Pointer[generation]
	closed atomic.Bool

	mu       sync.Mutex // serializes reloads; guards the fields below
	lastSeen [32]byte   // hash of the file content last read (good or bad)
	done     chan struct{}

	retiring sync.WaitGroup // goroutines closing replaced registries
}

// generation is one registry with the count of its users: 1 while it is
// the current one, plus one per action running on it.
type generation struct {
	reg     *Registry
	hash    string // sha256 of the settings file, hex; "" without a file
	refs    atomic.Int64
	drained chan struct{} // closed when refs drops to 0
}

func newGeneration(reg *Registry, hash string) *generation {
	g := &generation{reg: reg, hash: hash, drained: make(chan struct{})}
	g.refs.Store(1)
	return g
}

// acquire counts one more user, unless the generation was already retired
// and drained.
func (g *generation) acquire() bool {
	for {
		n := g.refs.Load()
		if n == 0 {
			return false
		}
		if g.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *generation) release() {
	if g.refs.Add(-1) == 0 {
		close(g.drained)
	}
}

// NewReloader reads the settings and builds the first registry, as
// [NewRegistry] does with deps; its error is the file's error. The
// squall_action_* metrics are registered once and shared by every
// registry the Reloader builds; the executors of deps.Executors are shared
// too and never closed by the Reloader. It starts no goroutine:
// [Reloader.Watch] follows the file.
func NewReloader(cfg ReloaderConfig, deps Deps) (*Reloader, error) {
	if cfg.File != "" && cfg.Settings != nil {
		return nil, errors.New("action reloader: File and Settings are exclusive")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultReloadDebounce
	}
	if cfg.RescanInterval == 0 {
		cfg.RescanInterval = DefaultReloadRescanInterval
	}
	if cfg.File != "" {
		cfg.File = filepath.Clean(cfg.File)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{cfg: cfg, deps: deps, log: log.With(logKeyComponent, "action-reload"), done: make(chan struct{})}
	settings, sum, err := r.load()
	if err != nil {
		return nil, err
	}
	if r.m, err = newMetrics(deps.Registerer); err != nil {
		return nil, err
	}
	reg, err := newRegistry(settings, deps, r.m)
	if err != nil {
		r.m.Unregister()
		return nil, err
	}
	if r.rm, err = newReloadMetrics(deps.Registerer); err != nil {
		_ = reg.Close()
		r.m.Unregister()
		return nil, err
	}
	r.rm.success.SetToCurrentTime()
	r.lastSeen = sum
	r.cur.Store(newGeneration(reg, r.hashString(sum)))
	return r, nil
}

// load reads the settings and returns them with the hash of the file.
func (r *Reloader) load() (Config, [32]byte, error) {
	switch {
	case r.cfg.File != "":
		data, err := os.ReadFile(r.cfg.File)
		if err != nil {
			return Config{}, sha256.Sum256([]byte("error: " + err.Error())), fmt.Errorf("load action config: %w", err)
		}
		sum := sha256.Sum256(data)
		cfg, err := parseFile(r.cfg.File, data)
		return cfg, sum, err
	case r.cfg.Settings != nil:
		return *r.cfg.Settings, [32]byte{}, nil
	}
	return Default(), [32]byte{}, nil
}

func (r *Reloader) hashString(sum [32]byte) string {
	if r.cfg.File == "" {
		return ""
	}
	return hex.EncodeToString(sum[:])
}

// Run executes the action with the current registry, as [Registry.Run]
// does. A reload during the action does not affect it.
func (r *Reloader) Run(ctx context.Context, a tree.Action) error {
	g := r.acquire()
	if g == nil {
		return NewPermanent(fmt.Errorf("action %s: %w", a.ID, ErrClosed))
	}
	defer g.release()
	return g.reg.Run(ctx, a)
}

// acquire returns the current generation, counted as used; nil once the
// Reloader is closed.
func (r *Reloader) acquire() *generation {
	for {
		g := r.cur.Load()
		if g.acquire() {
			return g
		}
		if r.closed.Load() {
			return nil
		}
		// Replaced between the load and the acquire: the new one is
		// stored already.
	}
}

// IDs returns the action ids the current registry handles, sorted.
func (r *Reloader) IDs() []string { return r.cur.Load().reg.IDs() }

// Hash returns the sha256 (hex) of the settings file the current registry
// was built from; "" without a file.
func (r *Reloader) Hash() string { return r.cur.Load().hash }

// Reloaded returns a channel closed when the next reload attempt ends,
// whatever its result (a read that finds the file unchanged is not an
// attempt).
func (r *Reloader) Reloaded() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Reload reads the settings file and, if it is valid, swaps in a new
// registry built from it, even when the file did not change (secret files,
// such as finding.token_file, are read again). On error the current
// registry stays and the error says why. Without a file it does nothing.
func (r *Reloader) Reload(ctx context.Context) error {
	if r.cfg.File == "" {
		return nil
	}
	return r.reload(ctx, true)
}

// reload reads the file and rebuilds the registry; unless force, only
// when the file's content differs from the last read.
func (r *Reloader) reload(ctx context.Context, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.closed.Load() {
		return ErrClosed
	}
	settings, sum, err := r.load()
	if !force && sum == r.lastSeen {
		return nil
	}
	r.lastSeen = sum
	defer func() {
		close(r.done)
		r.done = make(chan struct{})
	}()
	var reg *Registry
	if err == nil {
		reg, err = newRegistry(settings, r.deps, r.m)
	}
	if err != nil {
		r.rm.reloads.WithLabelValues(resultError).Inc()
		r.log.Error("actions settings not reloaded; the current executors stay",
			slog.String(logKeyPath, r.cfg.File), slog.String(logKeyError, err.Error()))
		return err
	}
	old := r.cur.Load()
	next := newGeneration(reg, r.hashString(sum))
	r.cur.Store(next)
	r.rm.reloads.WithLabelValues(resultOK).Inc()
	r.rm.success.SetToCurrentTime()
	before, after := old.reg.IDs(), reg.IDs()
	r.log.Info("actions settings reloaded",
		slog.String(logKeyPath, r.cfg.File), slog.String(logKeySHA256, next.hash),
		slog.Any(logKeyEnabled, after),
		slog.Any(logKeyAdded, subtract(after, before)), slog.Any(logKeyRemoved, subtract(before, after)))
	r.retire(old)
	return nil
}

// retire closes g's registry once no action runs on it any more.
func (r *Reloader) retire(g *generation) {
	r.retiring.Add(1)
	go func() {
		defer r.retiring.Done()
		g.release()
		<-g.drained
		if err := g.reg.Close(); err != nil {
			r.log.Warn("closing the replaced action executors", slog.String(logKeyError, err.Error()))
		}
	}()
}

// subtract returns the ids of a that are not in b.
func subtract(a, b []string) []string {
	out := []string{}
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// Watch follows the settings file until ctx ends, and reloads it when its
// content changes. It watches the file's directory, not the file, so that
// a file replaced by a rename (an editor's save, a Kubernetes ConfigMap
// update through symbolic links) is seen; every event is only a hint: once
// the directory is quiet for the debounce delay, or at every rescan
// interval, the file is read, and reloaded if its content differs from the
// last read. Without a file it returns at once. It returns an error only
// when the directory cannot be watched at the start.
func (r *Reloader) Watch(ctx context.Context) error {
	if r.cfg.File == "" {
		return nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch actions settings: %w", err)
	}
	defer fw.Close()
	dir := filepath.Dir(r.cfg.File)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watch actions settings directory: %w", err)
	}
	// A change between NewReloader and the watch is caught here.
	_ = r.reload(ctx, false)

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var pending bool
	var burst time.Time
	var tick <-chan time.Time
	if r.cfg.RescanInterval > 0 {
		t := time.NewTicker(r.cfg.RescanInterval)
		defer t.Stop()
		tick = t.C
	}
	schedule := func() {
		now := time.Now()
		if !pending {
			pending, burst = true, now
		}
		delay := min(r.cfg.Debounce, max(burst.Add(5*r.cfg.Debounce).Sub(now), 0))
		debounce.Reset(delay)
	}
	rescan := func() {
		pending = false
		debounce.Stop()
		if !slices.Contains(fw.WatchList(), dir) {
			// The directory itself was removed or replaced.
			if err := fw.Add(dir); err != nil {
				r.log.Warn("cannot watch the actions settings directory", slog.String(logKeyPath, dir), slog.String(logKeyError, err.Error()))
			}
		}
		_ = r.reload(ctx, false) // logged and counted
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-fw.Events:
			if !ok {
				return errors.New("actions settings watch closed")
			}
			schedule()
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("actions settings watch closed")
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				r.log.Warn("actions settings watch error", slog.String(logKeyError, err.Error()))
			}
			schedule()
		case <-debounce.C:
			rescan()
		case <-tick:
			rescan()
		}
	}
}

// Close closes the current registry once its running actions have
// finished, waits for the registries being retired, and unregisters the
// metrics. Later calls to Run fail with [ErrClosed].
func (r *Reloader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Swap(true) {
		return nil
	}
	g := r.cur.Load()
	g.release()
	<-g.drained
	err := g.reg.Close()
	r.retiring.Wait()
	r.m.Unregister()
	r.rm.Unregister()
	return err
}

// Results of squall_actions_config_reloads_total.
const (
	resultOK    = "ok"
	resultError = "error"
)

// Log attribute keys of the reloads.
const (
	logKeySHA256  = "sha256"
	logKeyEnabled = "enabled"
	logKeyAdded   = "added"
	logKeyRemoved = "removed"
)

// reloadMetrics count the reloads of the settings file.
type reloadMetrics struct {
	*metricset.Set
	reloads *prometheus.CounterVec
	success prometheus.Gauge
}

func newReloadMetrics(reg prometheus.Registerer) (*reloadMetrics, error) {
	m := &reloadMetrics{
		reloads: metricset.CounterVec("squall_actions_config_reloads_total", "Reloads of the actions settings file (--actions-config), by result (ok, error: the previous settings stay).", "result"),
		success: metricset.Gauge("squall_actions_config_last_reload_success_timestamp_seconds", "When the actions settings in use were loaded (at start or by the last successful reload), as a Unix time."),
	}
	// Both results exist from the start, so that alerts on increase() see
	// the first error.
	m.reloads.WithLabelValues(resultOK)
	m.reloads.WithLabelValues(resultError)
	var err error
	if m.Set, err = metricset.Register(reg, m.reloads, m.success); err != nil {
		return nil, fmt.Errorf("register action reload metrics: %w", err)
	}
	return m, nil
}
