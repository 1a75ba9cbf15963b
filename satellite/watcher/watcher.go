package watcher

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/webhooks"
)

// Defaults of [Config].
const (
	DefaultDebounce       = 200 * time.Millisecond
	DefaultRescanInterval = 30 * time.Second
)

// Config configures a [Watcher].
type Config struct {
	// Dir is the folder of webhook files. Required.
	Dir string
	// Debounce is how long the folder must be quiet after a change before
	// it is read (default 200 ms). A stream of changes is read at least
	// every 5×Debounce.
	Debounce time.Duration
	// RescanInterval is the period of the safety-net rescan, which catches
	// changes no event reported (default 30 s; 0 disables it).
	RescanInterval time.Duration
}

// DefaultConfig returns the defaults, without a folder.
func DefaultConfig() Config {
	return Config{Debounce: DefaultDebounce, RescanInterval: DefaultRescanInterval}
}

// Validate checks c; the errors name the field.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: required"))
	}
	if c.Debounce < 0 {
		errs = append(errs, fmt.Errorf("debounce: %s is negative", c.Debounce))
	}
	if c.RescanInterval < 0 {
		errs = append(errs, fmt.Errorf("rescan_interval: %s is negative", c.RescanInterval))
	}
	return errors.Join(errs...)
}

// Snapshot is one complete, validated set of webhooks. It is never changed
// after it is published.
type Snapshot struct {
	// Webhooks are the valid webhooks by id.
	Webhooks map[string]*webhooks.Webhook
	// Problems are the files that were skipped, with the reason.
	Problems []webhooks.FileError
	// Generation counts the published snapshots, from 1.
	Generation uint64
	// LoadedAt is when the folder was read.
	LoadedAt time.Time
}

// Watcher keeps the current set of webhooks of a folder. Build it with
// [New], then [Watcher.Run] it; read it from any goroutine with
// [Watcher.Lookup] and [Watcher.Snapshot].
type Watcher struct {
	cfg    Config
	logger *slog.Logger
	m      *metrics

	current atomic.Pointer[Snapshot]
	rescan  chan struct{}
	loaded  chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed when the next snapshot is published

	// Owned by the Run goroutine.
	files map[string][32]byte // file name → hash of its content
	// secretFiles are the token and secret files the webhook files named
	// at the last load: their changes reload too.
	secretFiles []string
}

// New validates cfg and builds a Watcher whose metrics are registered with
// reg (nil registers nothing). It starts nothing and reads nothing.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("webhook watcher config: %w", err)
	}
	cfg.Dir = filepath.Clean(cfg.Dir)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		cfg:     cfg,
		logger:  logger.With("component", "watcher", "dir", cfg.Dir),
		rescan:  make(chan struct{}, 1),
		loaded:  make(chan struct{}),
		changed: make(chan struct{}),
	}
	m, err := newMetrics(reg, w)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
}

// Lookup returns the webhook with the given id, or nil.
func (w *Watcher) Lookup(id string) *webhooks.Webhook {
	if s := w.current.Load(); s != nil {
		return s.Webhooks[id]
	}
	return nil
}

// Snapshot returns the current set of webhooks; nil before the first read.
func (w *Watcher) Snapshot() *Snapshot { return w.current.Load() }

// Loaded returns a channel closed once the folder was read for the first
// time.
func (w *Watcher) Loaded() <-chan struct{} { return w.loaded }

// Changed returns a channel closed when the next snapshot is published.
func (w *Watcher) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Rescan asks the running watcher to read the folder now (after SIGHUP, for
// example). It does not wait.
func (w *Watcher) Rescan() {
	select {
	case w.rescan <- struct{}{}:
	default:
	}
}

// Run reads the folder, publishes the first snapshot, and then watches the
// folder until ctx ends. It returns an error only when the folder cannot be
// watched or read at the start.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("webhook watcher: %w", err)
	}
	defer fw.Close()
	if err := fw.Add(w.cfg.Dir); err != nil {
		return fmt.Errorf("watch webhook directory: %w", err)
	}
	if err := w.scan(); err != nil {
		return err
	}
	rewatch := func() {
		if slices.Contains(fw.WatchList(), w.cfg.Dir) {
			return
		}
		// The folder itself was removed or replaced: watch the new one.
		if err := fw.Add(w.cfg.Dir); err != nil {
			w.logger.Warn("cannot watch the webhook directory", "error", err)
			return
		}
		w.logger.Info("watching the webhook directory again")
	}
	return w.loop(ctx, fw.Events, fw.Errors, rewatch)
}

// loop handles the folder's events until ctx ends: every event is only a
// hint that something changed; a quiet period of Debounce (at most
// 5×Debounce after the first event of a burst), an overflow, a Rescan or the
// periodic tick reads the whole folder again.
func (w *Watcher) loop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, rewatch func()) error {
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var pending bool
	var burst time.Time
	maxDelay := 5 * w.cfg.Debounce

	var tick <-chan time.Time
	if w.cfg.RescanInterval > 0 {
		t := time.NewTicker(w.cfg.RescanInterval)
		defer t.Stop()
		tick = t.C
	}
	schedule := func(delay time.Duration) {
		now := time.Now()
		if !pending {
			pending, burst = true, now
		}
		if limit := burst.Add(maxDelay).Sub(now); delay > limit {
			delay = max(limit, 0)
		}
		debounce.Reset(delay)
	}
	rescan := func() {
		pending = false
		debounce.Stop()
		rewatch()
		if err := w.scan(); err != nil {
			w.logger.Warn("cannot read the webhook directory; keeping the current webhooks", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return errors.New("webhook watcher closed")
			}
			w.logger.Debug("webhook directory event", "event", ev.Op.String(), "name", filepath.Base(ev.Name))
			schedule(w.cfg.Debounce)
		case err, ok := <-errs:
			if !ok {
				return errors.New("webhook watcher closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: only a full read is the truth.
				w.logger.Warn("webhook directory events overflowed; rescanning")
				schedule(0)
				continue
			}
			w.logger.Warn("webhook directory watch error", "error", err)
			schedule(w.cfg.Debounce)
		case <-w.rescan:
			rescan()
		case <-debounce.C:
			rescan()
		case <-tick:
			rescan()
		}
	}
}

// scan reads the folder and publishes a new snapshot if any file changed.
// On error the current snapshot stays.
func (w *Watcher) scan() error {
	w.m.scans.Inc()
	files, err := fingerprint(w.cfg.Dir)
	if err != nil {
		w.m.reloads.WithLabelValues(resultError).Inc()
		return err
	}
	for _, path := range w.secretFiles {
		files[secretFileKey+path] = fingerprintSecret(path)
	}
	prev := w.current.Load()
	if prev != nil && maps.Equal(files, w.files) {
		return nil
	}
	// The token and secret files are fingerprinted as they are opened:
	// a change after that is seen by the next scan.
	secrets := make(map[string][32]byte)
	src := webhooks.Source{Dir: w.cfg.Dir, LookupEnv: os.LookupEnv, Opened: func(path string) {
		secrets[path] = fingerprintSecret(path)
	}}
	set, problems, err := webhooks.LoadDirWith(w.cfg.Dir, src)
	if err != nil {
		w.m.reloads.WithLabelValues(resultError).Inc()
		return err
	}
	for name := range files {
		if strings.HasPrefix(name, secretFileKey) {
			delete(files, name)
		}
	}
	w.secretFiles = w.secretFiles[:0]
	for path, h := range secrets {
		files[secretFileKey+path] = h
		w.secretFiles = append(w.secretFiles, path)
	}
	snap := &Snapshot{Webhooks: set, Problems: problems, Generation: 1, LoadedAt: time.Now()}
	if prev != nil {
		snap.Generation = prev.Generation + 1
	}
	added, removed, changed := diff(w.files, files)
	w.files = files
	w.current.Store(snap)

	w.m.reloads.WithLabelValues(resultOK).Inc()
	for _, p := range problems {
		reason := problemReason(p)
		w.m.fileErrors.WithLabelValues(reason).Inc()
		w.logger.Warn("webhook file skipped", "file", p.Name, "reason", reason, "error", p.Err)
	}
	w.logger.Info("webhooks loaded", "generation", snap.Generation, "webhooks", len(set),
		"skipped_files", len(problems), "added_files", added, "removed_files", removed, "changed_files", changed)

	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	if snap.Generation == 1 {
		close(w.loaded)
	}
	return nil
}

// fingerprint hashes the webhook files of dir, chosen as webhooks.LoadDir
// chooses them, so that a rescan that finds nothing new changes nothing.
func fingerprint(dir string) (map[string][32]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open webhook directory: %w", err)
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("read webhook directory: %w", err)
	}
	files := make(map[string][32]byte)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		info, err := root.Stat(name)
		switch {
		case err != nil:
			files[name] = sha256.Sum256([]byte("error: " + err.Error()))
		case !info.Mode().IsRegular():
		case info.Size() > webhooks.MaxFileSize:
			files[name] = sha256.Sum256(fmt.Appendf(nil, "large: %d %d", info.Size(), info.ModTime().UnixNano()))
		default:
			data, err := root.ReadFile(name)
			if err != nil {
				data = []byte("error: " + err.Error())
			}
			files[name] = sha256.Sum256(data)
		}
	}
	return files, nil
}

// secretFileKey prefixes the token and secret files in the fingerprint
// map (webhook file names never start with a space).
const secretFileKey = " secret file "

// fingerprintSecret hashes a token or secret file: its mode (a file made
// private loads again) and its content.
func fingerprintSecret(path string) [32]byte {
	info, err := os.Stat(path)
	if err != nil {
		return sha256.Sum256([]byte("error: " + err.Error()))
	}
	if !info.Mode().IsRegular() || info.Size() > webhooks.MaxSecretFileSize {
		return sha256.Sum256(fmt.Appendf(nil, "%s %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano()))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		data = []byte("error: " + err.Error())
	}
	return sha256.Sum256(append(data, info.Mode().String()...))
}

// diff lists the file names added, removed and changed from old to cur.
func diff(old, cur map[string][32]byte) (added, removed, changed []string) {
	for name, h := range cur {
		switch oh, ok := old[name]; {
		case !ok:
			added = append(added, name)
		case oh != h:
			changed = append(changed, name)
		}
	}
	for name := range old {
		if _, ok := cur[name]; !ok {
			removed = append(removed, name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}

// Reasons of squall_webhooks_file_errors_total.
const (
	reasonDuplicate  = "duplicate"  // the id is taken by an earlier file
	reasonInvalid    = "invalid"    // not a valid webhook file
	reasonUnreadable = "unreadable" // could not be read
)

// problemReason classifies a skipped file.
func problemReason(p webhooks.FileError) string {
	var verr *webhooks.ValidationError
	switch {
	case errors.As(p.Err, &verr) && verr.Field == "id" && strings.HasPrefix(verr.Err.Error(), "duplicate id"):
		return reasonDuplicate
	case errors.As(p.Err, &verr):
		return reasonInvalid
	}
	return reasonUnreadable
}
