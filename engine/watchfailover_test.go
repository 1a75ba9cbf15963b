package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

// TestService_WatchFailoverClearsWarning: when the master an engine
// watches dies, the warning "master unreachable" goes as soon as another
// master answers, not at the end of that master's blocking wait (30 s
// here, the default).
func TestService_WatchFailoverClearsWarning(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{broker: kafkatest.Config{Partitions: 1}, masters: 3})
	e.deploy("v1")
	cfg := e.config()
	cfg.MasterURLs = []string{e.masters.URL(0), e.masters.URL(1), e.masters.URL(2)}
	cfg.WatchWait = DefaultWatchWait
	r := startReady(t, cfg)

	watched := r.watcher.last.Load().master
	i := slices.Index(cfg.MasterURLs, watched)
	if i < 0 {
		t.Fatalf("the engine watches %s, not one of %v", watched, cfg.MasterURLs)
	}
	errs := r.counter("squall_engine_watch_errors_total")
	killed := time.Now()
	e.masters.Kill(i)
	polltest.Wait(t, "the watch to fail", readyTimeout, func() bool {
		return r.counter("squall_engine_watch_errors_total") > errs
	})
	// The bound: far less than the wait, with room for an election
	// (a follower answers 503 until it knows the new leader) and the
	// watcher's backoff.
	const bound = 10 * time.Second
	polltest.Wait(t, "another master to answer the watch and the warning to go", bound, func() bool {
		o := r.watcher.last.Load()
		if o.err != nil || o.master == watched {
			return false
		}
		_, warnings := r.readiness()
		return !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "master unreachable") })
	})
	t.Logf("warning cleared %s after the watched master was killed", time.Since(killed).Round(10*time.Millisecond))
	if !r.Ready() {
		reasons, _ := r.readiness()
		t.Errorf("engine not ready after the failover: %v", reasons)
	}
}
