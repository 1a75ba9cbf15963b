package engine

import (
	"slices"
	"sync"

	"github.com/squallhq/squall/engine/kafkasource"
)

// offsetTracker follows the messages of each partition from fetch to the
// end of their processing, and says which offsets may be committed: in each
// partition, the offset after the longest run of finished messages from the
// oldest unfinished one, in fetch order. A message never finished (its
// processing abandoned at shutdown) holds back every later one of its
// partition, so nothing after it is committed: at-least-once, no gaps.
//
// Offsets need not be contiguous (compaction, transaction markers): the
// tracker follows the fetch order, not offset+1. When a partition's offsets
// go back (kafka-go restarted it at the committed offset after a
// rebalance), what was tracked for it is dropped: those messages come
// again. Partitions outside the current assignment are not tracked, so a
// member never commits for a partition it lost.
type offsetTracker struct {
	mu       sync.Mutex
	parts    map[int]*partitionOffsets
	assigned map[int]bool // nil: the assignment is not known; track all
	epoch    uint64       // last epoch given to a partition's tracking
	finished int          // messages finished since the last Positions
	// waiting is set while the fetch loop waits for room (waitRoom):
	// done then asks for a commit at once.
	waiting bool
	// room is signaled when commits or a new assignment make room.
	room chan struct{}
}

// partitionOffsets is one partition's window of fetched messages.
type partitionOffsets struct {
	epoch uint64
	// seq of offsets[0]; seqs count the messages fetched in this epoch.
	base    uint64
	offsets []int64
	done    []bool
	// last is the last offset fetched, -1 before the first.
	last int64
	// next is the position to commit (the offset after the last message
	// of the finished run); committed is the last one committed, -1 for
	// none known.
	next, committed int64
	// awaiting counts the finished messages up to next not committed
	// yet; inCommit how many of them the commit in progress covers.
	awaiting, inCommit int
}

// ticket identifies a tracked message for done.
type ticket struct {
	part  int
	epoch uint64 // 0: not tracked
	seq   uint64
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{parts: make(map[int]*partitionOffsets), room: make(chan struct{}, 1)}
}

// addBatch records the fetched messages of one partition, in order, and
// appends their tickets to tks.
func (t *offsetTracker) addBatch(part int, msgs []kafkasource.Message, tks []ticket) []ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range msgs {
		tks = append(tks, t.addLocked(part, msgs[i].Offset()))
	}
	return tks
}

// add records a fetched message and returns its ticket.
func (t *offsetTracker) add(part int, offset int64) ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addLocked(part, offset)
}

// addLocked is add with t.mu held.
func (t *offsetTracker) addLocked(part int, offset int64) ticket {
	if t.assigned != nil && !t.assigned[part] {
		return ticket{part: part}
	}
	p := t.parts[part]
	if p == nil || offset <= p.last {
		// A new partition, or a restart at an older offset: start over.
		t.epoch++
		p = &partitionOffsets{epoch: t.epoch, last: -1, next: -1, committed: -1}
		t.parts[part] = p
	}
	p.last = offset
	seq := p.base + uint64(len(p.offsets))
	p.offsets = append(p.offsets, offset)
	p.done = append(p.done, false)
	return ticket{part: part, epoch: p.epoch, seq: seq}
}

// done records that the ticket's message was processed (or dead-lettered)
// and returns how many messages were finished since the last positions,
// and whether a commit is wanted at once (the fetch loop waits for one and
// this message made something committable).
func (t *offsetTracker) done(tk ticket) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished++
	p := t.parts[tk.part]
	if tk.epoch == 0 || p == nil || p.epoch != tk.epoch || tk.seq < p.base {
		return t.finished, false
	}
	i := tk.seq - p.base
	if i >= uint64(len(p.done)) {
		return t.finished, false
	}
	p.done[i] = true
	n := 0
	for n < len(p.done) && p.done[n] {
		n++
	}
	if n > 0 {
		p.next = p.offsets[n-1] + 1
		p.offsets, p.done = p.offsets[n:], p.done[n:]
		p.base += uint64(n)
		p.awaiting += n
		if len(p.offsets) == 0 {
			// Reuse the arrays from their start.
			p.offsets, p.done = p.offsets[:0:0], p.done[:0:0]
		}
	}
	return t.finished, n > 0 && t.waiting
}

// positions returns the positions to commit: the partitions whose finished
// run moved since their last commit, sorted.
func (t *offsetTracker) positions() []kafkasource.Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = 0
	var ps []kafkasource.Position
	for part, p := range t.parts {
		if p.next >= 0 && p.next != p.committed {
			ps = append(ps, kafkasource.Position{Partition: part, Next: p.next})
			p.inCommit = p.awaiting
		}
	}
	slices.SortFunc(ps, func(a, b kafkasource.Position) int { return a.Partition - b.Partition })
	return ps
}

// committed records positions as committed.
func (t *offsetTracker) committed(ps []kafkasource.Position) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pos := range ps {
		if p := t.parts[pos.Partition]; p != nil && p.next >= pos.Next {
			p.committed = pos.Next
			p.awaiting -= min(p.inCommit, p.awaiting)
			p.inCommit = 0
		}
	}
	t.signalRoom()
}

// signalRoom wakes the fetch loop if it waits for room. The caller holds
// t.mu.
func (t *offsetTracker) signalRoom() {
	t.waiting = false
	select {
	case t.room <- struct{}{}:
	default:
	}
}

// uncommitted returns the number of tracked messages not committed yet:
// unfinished, behind an unfinished one, or finished and awaiting their
// commit. When it is at least limit, it also records that the fetch loop
// waits for room, so that done asks for a commit as soon as one helps.
func (t *offsetTracker) uncommitted(limit int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.parts {
		n += len(p.offsets) + p.awaiting
	}
	if n >= limit {
		t.waiting = true
	}
	return n
}

// assign sets the partitions this member owns: the others are forgotten
// and their messages no longer tracked. joined false means none.
func (t *offsetTracker) assign(joined bool, parts []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.assigned = make(map[int]bool, len(parts))
	if joined {
		for _, p := range parts {
			t.assigned[p] = true
		}
	}
	for part := range t.parts {
		if !t.assigned[part] {
			delete(t.parts, part)
		}
	}
	t.signalRoom()
}

// inFlight returns the number of tracked messages not yet finished or
// behind an unfinished one.
func (t *offsetTracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.parts {
		n += len(p.offsets)
	}
	return n
}
