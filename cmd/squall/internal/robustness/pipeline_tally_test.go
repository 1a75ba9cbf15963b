package robustness

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// PipelineTally follows webhooks through the pipeline of TestPipeline:
// those a satellite acknowledged (with the event id it answered), the
// records in the events topic, and the http actions a target received
// (with their Idempotency-Key). Webhooks are named by an id of the test's own, carried
// in the payload. It is safe for concurrent use.
type PipelineTally struct {
	mu      sync.Mutex
	acked   map[string]string         // webhook id -> event id answered
	records map[string][]string       // webhook id -> event id of each record
	actions map[string]map[string]int // webhook id -> Idempotency-Key -> requests
}

// NewPipelineTally returns an empty tally.
func NewPipelineTally() *PipelineTally {
	return &PipelineTally{
		acked:   map[string]string{},
		records: map[string][]string{},
		actions: map[string]map[string]int{},
	}
}

// Acked records a webhook a satellite acknowledged with eventID.
func (p *PipelineTally) Acked(id, eventID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked[id] = eventID
}

// Record records a record of the events topic: the webhook id in its
// payload and its squall-event-id header.
func (p *PipelineTally) Record(id, eventID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records[id] = append(p.records[id], eventID)
}

// ResetRecords forgets the records, to count them again.
func (p *PipelineTally) ResetRecords() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.records)
}

// Action records an action the target received for webhook id, with its
// Idempotency-Key header ("" when none).
func (p *PipelineTally) Action(id, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.actions[id]
	if m == nil {
		m = map[string]int{}
		p.actions[id] = m
	}
	m[key]++
}

// MissingActions returns the acknowledged webhooks no action arrived for,
// sorted.
func (p *PipelineTally) MissingActions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.acked {
		if len(p.actions[id]) == 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// PipelineCounts is the outcome of a pipeline run.
type PipelineCounts struct {
	// Acked is the number of webhooks the satellites acknowledged.
	Acked int
	// LostInKafka are the acknowledged webhooks with no record in the
	// events topic; LostActions those with no action executed. Both must
	// be empty: an acknowledgement is a promise.
	LostInKafka, LostActions []string
	// Records is the number of records of acknowledged or unacknowledged
	// webhooks in the events topic; RecordDuplicates the records beyond
	// the first of each webhook; RecordIDMismatch the acknowledged
	// webhooks whose record carries another event id than the one
	// answered, or several.
	Records, RecordDuplicates int
	RecordIDMismatch          []string
	// Actions is the number of http actions received; ActionDuplicates
	// those beyond the first of each webhook (raw); KeyedDuplicates those
	// that carried a key not seen before for their webhook beyond the
	// first (what a target that honours Idempotency-Key would apply
	// twice): it must be 0. Unkeyed counts the actions without a key.
	Actions, ActionDuplicates, KeyedDuplicates, Unkeyed int
}

// Counts computes the outcome.
func (p *PipelineTally) Counts() PipelineCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c PipelineCounts
	c.Acked = len(p.acked)
	for id, eventID := range p.acked {
		recs := p.records[id]
		if len(recs) == 0 {
			c.LostInKafka = append(c.LostInKafka, id)
		} else if slices.ContainsFunc(recs, func(e string) bool { return e != eventID }) {
			c.RecordIDMismatch = append(c.RecordIDMismatch, id)
		}
		if len(p.actions[id]) == 0 {
			c.LostActions = append(c.LostActions, id)
		}
	}
	for _, recs := range p.records {
		c.Records += len(recs)
		c.RecordDuplicates += len(recs) - 1
	}
	for _, keys := range p.actions {
		n := 0
		for key, k := range keys {
			n += k
			if key == "" {
				c.Unkeyed += k
			}
		}
		c.Actions += n
		c.ActionDuplicates += n - 1
		c.KeyedDuplicates += len(keys) - 1
	}
	slices.Sort(c.LostInKafka)
	slices.Sort(c.LostActions)
	slices.Sort(c.RecordIDMismatch)
	return c
}

// String summarises the counts on one line.
func (c PipelineCounts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acknowledged webhooks %d; lost in Kafka %d, lost actions %d; ", c.Acked, len(c.LostInKafka), len(c.LostActions))
	fmt.Fprintf(&b, "records %d (duplicates %d, event id mismatches %d); ", c.Records, c.RecordDuplicates, len(c.RecordIDMismatch))
	fmt.Fprintf(&b, "http actions %d (duplicates raw %d, after idempotency keys %d, without a key %d)",
		c.Actions, c.ActionDuplicates, c.KeyedDuplicates, c.Unkeyed)
	return b.String()
}

func TestPipelineTally_Counts(t *testing.T) {
	t.Parallel()
	p := NewPipelineTally()
	p.Acked("a", "ev-a")
	p.Acked("b", "ev-b")
	p.Acked("c", "ev-c")
	p.Acked("d", "ev-d")
	// a: one record, one action. b: two records (the second with
	// another event id), an action redelivered with its key. c: in Kafka,
	// no action. d: lost. x: not acknowledged, in Kafka twice, actions
	// under two keys.
	p.Record("a", "ev-a")
	p.Record("b", "ev-b")
	p.Record("b", "ev-b2")
	p.Record("c", "ev-c")
	p.Record("x", "ev-x")
	p.Record("x", "ev-x")
	p.Action("a", "ka")
	p.Action("b", "kb")
	p.Action("b", "kb")
	p.Action("x", "kx1")
	p.Action("x", "kx2")
	p.Action("x", "")

	c := p.Counts()
	check := func(what string, got, want any) {
		t.Helper()
		switch g := got.(type) {
		case []string:
			if !slices.Equal(g, want.([]string)) {
				t.Errorf("%s = %q, want %q", what, g, want)
			}
		default:
			if got != want {
				t.Errorf("%s = %v, want %v", what, got, want)
			}
		}
	}
	check("Acked", c.Acked, 4)
	check("LostInKafka", c.LostInKafka, []string{"d"})
	check("LostActions", c.LostActions, []string{"c", "d"})
	check("Records", c.Records, 6)
	check("RecordDuplicates", c.RecordDuplicates, 2)
	check("RecordIDMismatch", c.RecordIDMismatch, []string{"b"})
	check("Actions", c.Actions, 6)
	check("ActionDuplicates", c.ActionDuplicates, 3)
	check("KeyedDuplicates", c.KeyedDuplicates, 2)
	check("Unkeyed", c.Unkeyed, 1)
	check("MissingActions", p.MissingActions(), []string{"c", "d"})
	if s := c.String(); s == "" {
		t.Error("empty summary")
	}
	p.ResetRecords()
	if c := p.Counts(); c.Records != 0 || len(c.LostInKafka) != 4 {
		t.Errorf("after ResetRecords: %+v", c)
	}
}
