package robustness

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/anishathalye/porcupine"
)

// findingState is a finding as a register: whether it exists, and its
// ticket ("" while null).
type findingState struct {
	exists bool
	ticket string
}

// FindingModel is the sequential specification of the findings API used
// by the workload, partitioned by finding uid: an insert creates the
// finding (201 when new, 200 when it existed: inserts are idempotent; 200
// also when the request was sent again after a leader failed while it had
// it, whose first attempt may have stored it: master.HeaderResent), a
// get answers 404 before it exists and then its ticket, a patch sets the
// ticket (404 when it does not exist). What a successful patch answers
// is checked as a read during the patch (see Porcupine). A patch sent
// again after a leader failed (master.HeaderResent) is one patch: the
// state machine applies a request id once.
// An unknown outcome may or may not have taken effect.
var FindingModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return findingState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(findingState), input.(Input), output.(Output)
		switch in.Kind {
		case OpInsert:
			if out.Unknown {
				return true, findingState{exists: true, ticket: s.ticket}
			}
			switch out.Status {
			case http.StatusCreated:
				return !s.exists, findingState{exists: true}
			case http.StatusOK:
				if out.Resent {
					// Sent again after a leader failed while it had
					// it: the first attempt may have stored it.
					return true, findingState{exists: true, ticket: s.ticket}
				}
				return s.exists, s
			}
			return true, s // refused: no change
		case OpGet:
			if out.Status == http.StatusNotFound {
				return !s.exists, s
			}
			return s.exists && s.ticket == out.Read, s
		case OpPatch:
			if out.Unknown {
				if !s.exists {
					return true, s
				}
				return true, findingState{exists: true, ticket: in.Value}
			}
			switch out.Status {
			case http.StatusOK:
				return s.exists, findingState{exists: true, ticket: in.Value}
			case http.StatusNotFound:
				return !s.exists, s
			}
			return true, s
		}
		return false, s
	},
	DescribeOperation: describeOperation,
	DescribeState: func(state any) string {
		s := state.(findingState)
		if !s.exists {
			return "absent"
		}
		return fmt.Sprintf("ticket %q", s.ticket)
	},
}

// configState is the description of the suite's node in the draft and
// in the active tree.
type configState struct {
	draft, active string
}

// ConfigInit is the description the suite's node has in the draft and
// the active tree when the workload starts.
const ConfigInit = "init"

// ConfigModel is the sequential specification of the configuration API
// used by the workload: one draft node whose description is a register
// (edited with PUT, read with GET on the draft), deploys that copy the
// draft to the active tree, and reads of the active node's description.
// An edit or deploy sent again after a leader failed is one operation,
// like a patch (see FindingModel).
var ConfigModel = porcupine.Model{
	Init: func() any { return configState{draft: ConfigInit, active: ConfigInit} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(configState), input.(Input), output.(Output)
		applied := out.Unknown || (out.Status >= 200 && out.Status < 300)
		switch in.Kind {
		case OpEdit:
			if applied {
				return true, configState{draft: in.Value, active: s.active}
			}
			return true, s
		case OpDeploy:
			if applied {
				return true, configState{draft: s.draft, active: s.draft}
			}
			return true, s
		case OpReadDraft:
			return out.Read == s.draft, s
		case OpReadActive:
			return out.Read == s.active, s
		}
		return false, s
	},
	DescribeOperation: describeOperation,
	DescribeState: func(state any) string {
		s := state.(configState)
		return fmt.Sprintf("draft %q, active %q", s.draft, s.active)
	},
}

// partitionByKey splits a history by Input.Key.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	idx := make(map[string]int)
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(Input).Key
		i, ok := idx[k]
		if !ok {
			i = len(parts)
			idx[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// TestModels checks the models on small hand-made histories, legal and
// illegal, so that a passing check of a real history means something.
func TestModels(t *testing.T) {
	t.Parallel()
	op := func(client int, kind, key, value string, call, ret int64, status int, read string) Op {
		return Op{Client: client, Kind: kind, Key: key, Value: value, Call: call, Return: ret, Status: status, Read: read}
	}
	resent := func(o Op) Op { o.Resent = true; return o }
	for _, tc := range []struct {
		name  string
		model porcupine.Model
		ops   []Op
		ok    bool
	}{
		{"finding: a first insert answered 200 (already stored)", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 200, ""),
			op(1, OpGet, "u1", "", 11, 20, 200, ""),
		}, false},
		{"finding: a resent first insert answered 200, stored by its first attempt", FindingModel, []Op{
			resent(op(0, OpInsert, "u1", "", 0, 10, 200, "")),
			op(1, OpGet, "u1", "", 11, 20, 200, ""),
		}, true},
		{"finding: a resent insert answered 200 does not undo a patch", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 20, 200, "a"),
			resent(op(1, OpInsert, "u1", "", 21, 30, 200, "")),
			op(1, OpGet, "u1", "", 31, 40, 200, ""),
		}, false},
		{"finding: an unknown patch that only another patch's answer saw", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 30, 200, "b"),
			op(1, OpPatch, "u1", "b", 12, -1, 0, ""),
		}, true},
		{"finding: a patch answers a value nobody wrote", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 30, 200, "b"),
		}, false},
		{"finding: insert, patch, get", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 20, 200, "a"),
			op(1, OpGet, "u1", "", 21, 30, 200, "a"),
		}, true},
		{"finding: stale read after an acknowledged patch", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 20, 200, "a"),
			op(1, OpGet, "u1", "", 21, 30, 200, ""),
		}, false},
		{"finding: concurrent patches, either order", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 20, 200, "a"),
			op(1, OpPatch, "u1", "b", 12, 19, 200, "b"),
			op(2, OpGet, "u1", "", 21, 30, 200, "a"),
		}, true},
		{"finding: an unknown patch that a read saw", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, -1, 0, ""),
			op(1, OpGet, "u1", "", 40, 50, 200, "a"),
			op(1, OpGet, "u1", "", 51, 60, 200, "a"),
		}, true},
		{"finding: an unknown patch cannot be seen, then unseen", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, -1, 0, ""),
			op(1, OpGet, "u1", "", 40, 50, 200, "a"),
			op(1, OpGet, "u1", "", 51, 60, 200, ""),
		}, false},
		{"finding: a patch answers a concurrent later patch", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 30, 200, "a"),
			op(1, OpPatch, "u1", "b", 12, 29, 200, "a"),
			op(2, OpGet, "u1", "", 31, 40, 200, "a"),
		}, true},
		{"finding: a patch answers a value overwritten before its call", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(0, OpPatch, "u1", "a", 11, 20, 200, "a"),
			op(0, OpPatch, "u1", "b", 21, 30, 200, "b"),
			op(1, OpPatch, "u1", "c", 31, 40, 200, "a"),
		}, false},
		// A PATCH, edit or deploy whose leader failed is sent again to the
		// next leader with its request id: the state machine applies it
		// once, so its resent answer is one operation. Applied a second
		// time after a later write, it would undo that write.
		{"finding: a resent patch is one patch", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			resent(op(0, OpPatch, "u1", "a", 11, 30, 200, "a")),
			op(1, OpPatch, "u1", "b", 31, 40, 200, "b"),
			op(1, OpGet, "u1", "", 41, 50, 200, "b"),
		}, true},
		{"finding: a resent patch applied again after a later patch", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			resent(op(0, OpPatch, "u1", "a", 11, 30, 200, "a")),
			op(1, OpPatch, "u1", "b", 31, 40, 200, "b"),
			op(1, OpGet, "u1", "", 41, 50, 200, "a"),
		}, false},
		{"config: a resent edit is one edit", ConfigModel, []Op{
			resent(op(0, OpEdit, "config", "v1", 0, 10, 200, "")),
			op(1, OpEdit, "config", "v2", 11, 20, 200, ""),
			op(2, OpReadDraft, "config", "", 21, 30, 200, "v2"),
		}, true},
		{"config: a resent edit applied again after a later edit", ConfigModel, []Op{
			resent(op(0, OpEdit, "config", "v1", 0, 10, 200, "")),
			op(1, OpEdit, "config", "v2", 11, 20, 200, ""),
			op(2, OpReadDraft, "config", "", 21, 30, 200, "v1"),
		}, false},
		{"config: a resent deploy is one deploy", ConfigModel, []Op{
			op(0, OpEdit, "config", "v1", 0, 10, 200, ""),
			resent(op(0, OpDeploy, "config", "", 11, 20, 200, "")),
			op(1, OpEdit, "config", "v2", 21, 30, 200, ""),
			op(2, OpReadActive, "config", "", 31, 40, 200, "v1"),
		}, true},
		{"config: a resent deploy applied again after a later edit", ConfigModel, []Op{
			op(0, OpEdit, "config", "v1", 0, 10, 200, ""),
			resent(op(0, OpDeploy, "config", "", 11, 20, 200, "")),
			op(1, OpEdit, "config", "v2", 21, 30, 200, ""),
			op(2, OpReadActive, "config", "", 31, 40, 200, "v2"),
		}, false},
		{"finding: lost insert", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(1, OpGet, "u1", "", 21, 30, 404, ""),
		}, false},
		{"finding: a second 201", FindingModel, []Op{
			op(0, OpInsert, "u1", "", 0, 10, 201, ""),
			op(1, OpInsert, "u1", "", 21, 30, 201, ""),
		}, false},
		{"config: edit, deploy, reads", ConfigModel, []Op{
			op(0, OpEdit, "config", "v1", 0, 10, 200, ""),
			op(1, OpReadActive, "config", "", 11, 12, 200, ConfigInit),
			op(0, OpDeploy, "config", "", 13, 20, 200, ""),
			op(1, OpReadActive, "config", "", 21, 30, 200, "v1"),
			op(2, OpReadDraft, "config", "", 21, 30, 200, "v1"),
		}, true},
		{"config: deploy not visible after it was acknowledged", ConfigModel, []Op{
			op(0, OpEdit, "config", "v1", 0, 10, 200, ""),
			op(0, OpDeploy, "config", "", 13, 20, 200, ""),
			op(1, OpReadActive, "config", "", 21, 30, 200, ConfigInit),
		}, false},
		{"config: an unknown deploy", ConfigModel, []Op{
			op(0, OpEdit, "config", "v1", 0, 10, 200, ""),
			op(0, OpDeploy, "config", "", 13, -1, 503, ""),
			op(1, OpReadActive, "config", "", 21, 30, 200, ConfigInit),
			op(1, OpReadActive, "config", "", 31, 40, 200, "v1"),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := porcupine.CheckOperations(tc.model, Porcupine(tc.ops)); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}

// describeOperation describes an operation of either model for the
// visualization.
func describeOperation(input, output any) string {
	in := input.(Input)
	if in.Value != "" {
		return fmt.Sprintf("%s(%q) → %v", in.Kind, in.Value, output)
	}
	return fmt.Sprintf("%s → %v", in.Kind, output)
}
