package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// kafkaErrorRecent is how long a Kafka error line counts as the reason the
// engine has not joined its group.
const kafkaErrorRecent = time.Minute

// readiness explains Ready: the reasons the engine does not process events
// (none when it does), and warnings about a ready engine.
func (s *Service) readiness() (reasons, warnings []string) {
	if s.draining.Load() {
		reasons = append(reasons, "shutting down")
	}
	last := s.watcher.last.Load()
	if s.current.Load() == nil {
		switch {
		case last == nil:
			reasons = append(reasons, "waiting for the first answer of a master's tree watch")
		case last.err != nil:
			reasons = append(reasons, watchProblem(last))
		case last.index == 0:
			reasons = append(reasons, "no tree deployed: the masters have no active tree yet (deploy a draft through the configuration API)")
		default:
			reason := fmt.Sprintf("the active tree (index %d) did not compile: see squall_engine_tree_compile_failures_total and the log", last.index)
			if r := s.refused.Load(); r != nil && r.index == last.index {
				reason = fmt.Sprintf("the active tree (index %d) was refused: %v", r.index, r.err)
			}
			reasons = append(reasons, reason)
		}
	} else if last != nil && last.err != nil {
		warnings = append(warnings, watchProblem(last)+"; the current tree stays in use")
	}
	if o, cur := s.fromCache.Load(), s.current.Load(); o != nil && cur != nil && cur.index == o.index {
		warnings = append(warnings, fmt.Sprintf("running on a cached tree of index %d from %s (%s), kept from an earlier run: no master answered when the engine started; the masters' tree replaces it as soon as one serves it",
			o.index, o.savedAt.Format(time.RFC3339), s.cache.path()))
	}
	if r, cur := s.refused.Load(), s.current.Load(); r != nil && cur != nil && r.index > cur.index {
		// Events still flow, with the last tree that compiled.
		warnings = append(warnings, fmt.Sprintf("the active tree (index %d) was refused: %v; events are evaluated with the tree of index %d (squall_engine_tree_compile_failures_total)", r.index, r.err, cur.index))
	}
	a := s.Assignment()
	switch {
	case s.current.Load() == nil:
		// Kafka is not consulted before the first tree.
	case !a.Joined:
		r := "not a member of the Kafka consumer group (joining, or a rebalance is in progress)"
		if src := s.source.Load(); src != nil {
			if text, at := src.LastError(); text != "" && time.Since(at) < kafkaErrorRecent {
				r = "Kafka unreachable or refusing the group: " + text
			}
		}
		reasons = append(reasons, r)
	case len(a.Partitions) == 0:
		warnings = append(warnings, "no partitions assigned: the group has more engines than the topic has partitions, so this one waits as a standby")
	}
	return reasons, warnings
}

// watchProblem says why a tree watch request failed.
func watchProblem(o *watchOutcome) string {
	var me *masterError
	if errors.As(o.err, &me) && (me.Status == http.StatusUnauthorized || me.Status == http.StatusForbidden) {
		return fmt.Sprintf("master %s refuses the engine's token (%d %s: %s): give --token-file a token with view on the root", o.master, me.Status, me.Code, me.Message)
	}
	return fmt.Sprintf("master unreachable: %v", o.err)
}

// logNotReady repeats, every interval while the engine is not ready, why.
func (s *Service) logNotReady(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.Ready() || s.draining.Load() {
			continue
		}
		reasons, _ := s.readiness()
		s.log.Warn("engine not ready", slog.String("reasons", strings.Join(reasons, "; ")))
	}
}
