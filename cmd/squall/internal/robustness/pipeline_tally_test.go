package robustness

import (
	"slices"
	"testing"
)

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
