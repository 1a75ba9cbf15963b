package engine

import (
	"slices"
	"testing"

	"github.com/squallhq/squall/engine/kafkasource"
)

func TestOffsetTracker(t *testing.T) {
	t.Parallel()
	type step struct {
		op     string // add, done, commit (positions then committed), assign, revoke
		part   int
		offset int64 // add: the offset; done: which added message (by offset)
		parts  []int // assign
		want   []kafkasource.Position
	}
	pos := func(p int, next int64) kafkasource.Position { return kafkasource.Position{Partition: p, Next: next} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing finished commits nothing", []step{
			{op: "add", part: 0, offset: 0},
			{op: "add", part: 0, offset: 1},
			{op: "commit", want: nil},
		}},
		{"in order", []step{
			{op: "add", part: 0, offset: 0},
			{op: "add", part: 0, offset: 1},
			{op: "done", part: 0, offset: 0},
			{op: "commit", want: []kafkasource.Position{pos(0, 1)}},
			{op: "done", part: 0, offset: 1},
			{op: "commit", want: []kafkasource.Position{pos(0, 2)}},
			{op: "commit", want: nil},
		}},
		{"a gap holds back later offsets", []step{
			{op: "add", part: 0, offset: 5},
			{op: "add", part: 0, offset: 6},
			{op: "add", part: 0, offset: 7},
			{op: "done", part: 0, offset: 6},
			{op: "done", part: 0, offset: 7},
			{op: "commit", want: nil},
			{op: "done", part: 0, offset: 5},
			{op: "commit", want: []kafkasource.Position{pos(0, 8)}},
		}},
		{"offsets need not be contiguous", []step{
			{op: "add", part: 0, offset: 10},
			{op: "add", part: 0, offset: 13},
			{op: "done", part: 0, offset: 10},
			{op: "commit", want: []kafkasource.Position{pos(0, 11)}},
			{op: "done", part: 0, offset: 13},
			{op: "commit", want: []kafkasource.Position{pos(0, 14)}},
		}},
		{"partitions are independent", []step{
			{op: "add", part: 0, offset: 0},
			{op: "add", part: 1, offset: 0},
			{op: "add", part: 2, offset: 0},
			{op: "add", part: 1, offset: 1},
			{op: "done", part: 1, offset: 1},
			{op: "done", part: 2, offset: 0},
			{op: "commit", want: []kafkasource.Position{pos(2, 1)}},
			{op: "done", part: 1, offset: 0},
			{op: "done", part: 0, offset: 0},
			{op: "commit", want: []kafkasource.Position{pos(0, 1), pos(1, 2)}},
		}},
		{"a restart at an older offset drops what was tracked", []step{
			{op: "add", part: 0, offset: 0},
			{op: "add", part: 0, offset: 1},
			{op: "add", part: 0, offset: 2},
			{op: "done", part: 0, offset: 0},
			{op: "commit", want: []kafkasource.Position{pos(0, 1)}},
			// Rebalance: kafka-go starts again at the committed offset 1.
			{op: "add", part: 0, offset: 1},
			// The old copies finishing do not count...
			{op: "done-old", part: 0, offset: 2},
			{op: "commit", want: nil},
			// ...the new ones do.
			{op: "done", part: 0, offset: 1},
			{op: "commit", want: []kafkasource.Position{pos(0, 2)}},
		}},
		{"a restart commits even below the last commit", []step{
			{op: "add", part: 0, offset: 7},
			{op: "done", part: 0, offset: 7},
			{op: "commit", want: []kafkasource.Position{pos(0, 8)}},
			{op: "add", part: 0, offset: 3},
			{op: "done", part: 0, offset: 3},
			{op: "commit", want: []kafkasource.Position{pos(0, 4)}},
		}},
		{"revoked partitions are forgotten and not tracked", []step{
			{op: "add", part: 0, offset: 0},
			{op: "add", part: 1, offset: 0},
			{op: "assign", parts: []int{1}},
			{op: "done", part: 0, offset: 0},
			{op: "done", part: 1, offset: 0},
			{op: "add", part: 0, offset: 1},
			{op: "done", part: 0, offset: 1},
			{op: "commit", want: []kafkasource.Position{pos(1, 1)}},
		}},
		{"out of the group nothing is tracked", []step{
			{op: "add", part: 0, offset: 0},
			{op: "revoke"},
			{op: "done", part: 0, offset: 0},
			{op: "add", part: 0, offset: 1},
			{op: "done", part: 0, offset: 1},
			{op: "commit", want: nil},
			{op: "assign", parts: []int{0}},
			{op: "add", part: 0, offset: 0},
			{op: "done", part: 0, offset: 0},
			{op: "commit", want: []kafkasource.Position{pos(0, 1)}},
		}},
		{"a failed commit is retried", []step{
			{op: "add", part: 0, offset: 0},
			{op: "done", part: 0, offset: 0},
			{op: "positions", want: []kafkasource.Position{pos(0, 1)}},
			{op: "commit", want: []kafkasource.Position{pos(0, 1)}},
			{op: "commit", want: nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newOffsetTracker()
			tickets := map[[2]int64]ticket{}
			old := map[[2]int64]ticket{}
			for i, s := range tt.steps {
				k := [2]int64{int64(s.part), s.offset}
				switch s.op {
				case "add":
					if tk, ok := tickets[k]; ok {
						old[k] = tk
					}
					tickets[k] = tr.add(s.part, s.offset)
				case "done":
					tr.done(tickets[k])
				case "done-old":
					tr.done(old[k])
				case "assign":
					tr.assign(true, s.parts)
				case "revoke":
					tr.assign(false, nil)
				case "positions":
					if got := tr.positions(); !slices.Equal(got, s.want) {
						t.Fatalf("step %d: positions %v, want %v", i, got, s.want)
					}
				case "commit":
					got := tr.positions()
					if !slices.Equal(got, s.want) {
						t.Fatalf("step %d: positions %v, want %v", i, got, s.want)
					}
					tr.committed(got)
				}
			}
		})
	}
}

func TestOffsetTracker_DoneCountsFinished(t *testing.T) {
	t.Parallel()
	tr := newOffsetTracker()
	a, b := tr.add(0, 0), tr.add(0, 1)
	if n, _ := tr.done(a); n != 1 {
		t.Errorf("after one: %d", n)
	}
	if n, _ := tr.done(b); n != 2 {
		t.Errorf("after two: %d", n)
	}
	if tr.inFlight() != 0 {
		t.Errorf("in flight %d", tr.inFlight())
	}
	tr.positions()
	if n, _ := tr.done(tr.add(0, 2)); n != 1 {
		t.Errorf("after positions: %d", n)
	}
}

// TestOffsetTracker_uncommitted counts the messages not committed yet
// (queued, behind an unfinished one, finished and awaiting their commit)
// and signals room when a commit lands; done asks for a commit at once
// while the fetch loop waits.
func TestOffsetTracker_uncommitted(t *testing.T) {
	t.Parallel()
	tr := newOffsetTracker()
	tks := []ticket{tr.add(0, 10), tr.add(0, 11), tr.add(0, 12), tr.add(1, 5)}
	if n := tr.uncommitted(10); n != 4 {
		t.Fatalf("uncommitted %d, want 4", n)
	}
	if _, now := tr.done(tks[1]); now {
		t.Error("done asks for a commit while the fetch loop does not wait")
	}
	// 11 finished behind 10: still 4.
	if n := tr.uncommitted(4); n != 4 {
		t.Fatalf("uncommitted %d, want 4", n)
	}
	// The fetch loop waits (limit 4 reached): finishing 10 makes 10 and
	// 11 committable, and asks for a commit.
	if _, now := tr.done(tks[0]); !now {
		t.Error("done does not ask for a commit while the fetch loop waits")
	}
	ps := tr.positions()
	tr.done(tks[2]) // finished during the commit: not covered by it
	select {
	case <-tr.room:
		t.Fatal("room before the commit landed")
	default:
	}
	tr.committed(ps)
	select {
	case <-tr.room:
	default:
		t.Fatal("no room signaled by the commit")
	}
	if n := tr.uncommitted(10); n != 2 { // 12 awaiting, 5 queued
		t.Fatalf("uncommitted after the commit %d, want 2", n)
	}
	tr.committed(tr.positions())
	if n := tr.uncommitted(10); n != 1 {
		t.Fatalf("uncommitted %d, want 1", n)
	}
	// Losing partition 1 drops its message.
	tr.assign(true, []int{0})
	if n := tr.uncommitted(10); n != 0 {
		t.Fatalf("uncommitted after the rebalance %d, want 0", n)
	}
}

// BenchmarkOffsetTracker measures add and done, as the fetch loop and the
// workers call them.
func BenchmarkOffsetTracker(b *testing.B) {
	tr := newOffsetTracker()
	var off int64
	b.ReportAllocs()
	for b.Loop() {
		tr.done(tr.add(int(off%6), off))
		off++
		if off%1000 == 0 {
			tr.committed(tr.positions())
		}
	}
}
