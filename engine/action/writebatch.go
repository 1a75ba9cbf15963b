package action

import (
	"context"

	"github.com/squallhq/squall/engine/tree"
)

// WriteBatch gathers the lines that archive actions append while a caller
// runs a run of events, so that each file gets them in one write(2) at
// [WriteBatch.Flush] instead of one per line. An archive action run under
// a context from [WithWriteBatch] encodes its line and checks its path at
// once (those failures are returned as usual) but leaves the write to
// Flush and returns nil: the caller must not count an event's archive
// lines as written, nor commit its offset, before Flush says so.
//
// A WriteBatch belongs to one goroutine.
type WriteBatch struct {
	// Owner and Index tag the lines added from now on (the caller's
	// index of the event being processed, and of the action among the
	// event's); Flush reports failed lines with them.
	Owner, Index int

	pending []*pendingWrite
	free    []*pendingWrite
	lines   int
}

// pendingWrite is the lines of one file of one executor.
type pendingWrite struct {
	ex    *archiveExecutor
	path  string
	buf   []byte
	lines []keyedLine
	acts  []ownedAction
}

type ownedAction struct {
	owner, index int
	act          tree.Action
}

// FailedWrite is an archive line that Flush could not write.
type FailedWrite struct {
	// Owner and Index are WriteBatch's when the line was added.
	Owner, Index int
	// Action is the archive action that produced the line: running it
	// again without the WriteBatch writes the line on its own, with the
	// registry's retries.
	Action tree.Action
	// Err is the failure.
	Err error
}

type writeBatchKey struct{}

// WithWriteBatch returns a context under which archive actions add their
// lines to b.
func WithWriteBatch(ctx context.Context, b *WriteBatch) context.Context {
	return context.WithValue(ctx, writeBatchKey{}, b)
}

func writeBatchFrom(ctx context.Context) *WriteBatch {
	b, _ := ctx.Value(writeBatchKey{}).(*WriteBatch)
	return b
}

// Pending reports whether lines wait for Flush.
func (b *WriteBatch) Pending() bool { return len(b.pending) > 0 }

// Lines returns the number of lines added since the batch was made: a
// caller compares it before and after an event to learn whether the event
// left lines to flush.
func (b *WriteBatch) Lines() int { return b.lines }

// add queues line for the file at path of ex.
func (b *WriteBatch) add(ex *archiveExecutor, path string, line []byte, kl keyedLine, act tree.Action) {
	var p *pendingWrite
	for _, q := range b.pending { // a batch holds few files
		if q.ex == ex && q.path == path {
			p = q
			break
		}
	}
	if p == nil {
		if n := len(b.free); n > 0 {
			p, b.free = b.free[n-1], b.free[:n-1]
		} else {
			p = &pendingWrite{}
		}
		p.ex, p.path = ex, path
		b.pending = append(b.pending, p)
	}
	b.lines++
	p.buf = append(p.buf, line...)
	kl.end = len(p.buf)
	p.lines = append(p.lines, kl)
	p.acts = append(p.acts, ownedAction{owner: b.Owner, index: b.Index, act: act})
}

// Flush writes the pending lines, one write(2) per file, and appends the
// lines it could not write to failed, which it returns. A file whose write
// fails may have received part of its lines.
func (b *WriteBatch) Flush(failed []FailedWrite) []FailedWrite {
	for i, p := range b.pending {
		if err := p.ex.append(p.path, p.buf, p.lines); err != nil {
			for _, oa := range p.acts {
				failed = append(failed, FailedWrite{Owner: oa.owner, Index: oa.index, Action: oa.act, Err: err})
			}
		}
		p.ex, p.path = nil, ""
		clear(p.acts)
		p.acts = p.acts[:0]
		p.lines = p.lines[:0]
		if cap(p.buf) > 1<<20 { // do not keep huge buffers alive
			p.buf = nil
		}
		p.buf = p.buf[:0]
		b.pending[i] = nil
		b.free = append(b.free, p)
	}
	b.pending = b.pending[:0]
	return failed
}
