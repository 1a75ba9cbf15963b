package store

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerSummaryEvery is how often a peer that stays unreachable is reported
// again.
const peerSummaryEvery = time.Minute

// peerUnreachable are raft's log messages of an RPC to a peer that
// failed. raft repeats them at every retry (tens a minute while a peer is
// down), at error level; the transport reports the same failures once per
// outage instead (peerWatch), so they go to debug.
var peerUnreachable = map[string]bool{
	"failed to appendEntries to":     true,
	"failed to heartbeat to":         true,
	"failed to make requestVote RPC": true,
	"failed to send snapshot to":     true,
	"failed to contact":              true,
}

// isPeerUnreachable reports whether a raft log record is one of
// peerUnreachable ("failed to install snapshot" only when it names the
// peer: the follower's own failure to install one is an error).
func isPeerUnreachable(msg string, args []any) bool {
	if peerUnreachable[msg] {
		return true
	}
	if msg != "failed to install snapshot" {
		return false
	}
	for i := 0; i < len(args); i += 2 {
		if args[i] == "peer" {
			return true
		}
	}
	return false
}

// peerWatch follows the outcome of raft's RPCs to each peer and logs the
// outages: a warning at the first failure, a reminder every
// peerSummaryEvery while it lasts, and one line with its length and the
// failed attempts when the peer answers again. A planned restart of a
// master then costs each of the others two lines, not a stream of errors.
type peerWatch struct {
	log *slog.Logger

	mu   sync.Mutex
	down map[raft.ServerID]*peerOutage
}

// peerOutage is a peer's run of failed RPCs.
type peerOutage struct {
	since, said time.Time
	attempts    int
}

func newPeerWatch(log *slog.Logger) *peerWatch {
	return &peerWatch{log: log, down: make(map[raft.ServerID]*peerOutage)}
}

// result records the outcome of an RPC to peer id at addr.
func (w *peerWatch) result(id raft.ServerID, addr raft.ServerAddress, err error) {
	now := time.Now()
	w.mu.Lock()
	o := w.down[id]
	switch {
	case err == nil && o == nil:
		w.mu.Unlock()
	case err == nil:
		delete(w.down, id)
		w.mu.Unlock()
		w.log.Info("raft peer reachable again", slog.String("peer", string(id)), slog.String("addr", string(addr)),
			slog.Duration("unreachable_for", now.Sub(o.since).Round(time.Millisecond)), slog.Int("failed_attempts", o.attempts))
	case o == nil:
		w.down[id] = &peerOutage{since: now, said: now, attempts: 1}
		w.mu.Unlock()
		w.log.Warn("raft peer unreachable", slog.String("peer", string(id)), slog.String("addr", string(addr)),
			slog.String("error", err.Error()))
	default:
		o.attempts++
		remind := now.Sub(o.said) >= peerSummaryEvery
		if remind {
			o.said = now
		}
		since, attempts := o.since, o.attempts
		w.mu.Unlock()
		if remind {
			w.log.Warn("raft peer still unreachable", slog.String("peer", string(id)), slog.String("addr", string(addr)),
				slog.Duration("unreachable_for", now.Sub(since).Round(time.Second)), slog.Int("failed_attempts", attempts),
				slog.String("error", err.Error()))
		}
	}
}
