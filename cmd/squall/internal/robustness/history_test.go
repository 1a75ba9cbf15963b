package robustness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one client operation of a History.
type Op struct {
	// Client is the client that ran it; Node the node it was sent to.
	Client int    `json:"client"`
	Node   string `json:"node"`
	// Kind is the operation (OpInsert, OpGet, …); Key the finding's uid,
	// or "config" for configuration operations.
	Kind string `json:"kind"`
	Key  string `json:"key"`
	// Value is what a write writes (a ticket, a description).
	Value string `json:"value,omitempty"`
	// Call and Return are nanoseconds since the history began; Return is
	// -1 when the outcome is unknown.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Status is the HTTP status (0 without an answer), Code the JSON
	// error code and Msg its message, Err the error's kind (see ErrorKind); Read is the value
	// a read returned; Write is the finding's uid an insert returned.
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Msg    string `json:"msg,omitempty"`
	Err    string `json:"err,omitempty"`
	Read   string `json:"read,omitempty"`
	UID    string `json:"uid,omitempty"`
	// Resent is true when the answer said the request was sent again
	// after a leader failed while it had it (master.HeaderResent): an
	// insert answered 200 may then have been stored by its own first
	// attempt.
	Resent bool `json:"resent,omitempty"`
}

// The operation kinds.
const (
	OpInsert     = "insert"      // PUT a unique credential finding
	OpGet        = "get"         // GET a finding: its ticket
	OpPatch      = "patch"       // PATCH a finding's ticket
	OpEdit       = "edit"        // PUT the draft node's description
	OpReadDraft  = "read-draft"  // GET the draft node's description
	OpDeploy     = "deploy"      // POST deploy of the draft
	OpReadActive = "read-active" // GET the active node's description
)

// Unknown reports whether the op's outcome is unknown: it may or may not
// have taken effect.
func (o Op) Unknown() bool { return o.Return < 0 }

// OK reports whether the op succeeded.
func (o Op) OK() bool { return o.Status >= 200 && o.Status < 300 }

// Write reports whether the op changes state when it succeeds.
func (o Op) Write() bool {
	switch o.Kind {
	case OpInsert, OpPatch, OpEdit, OpDeploy:
		return true
	}
	return false
}

// History records the operations of concurrent clients. Its methods are
// safe for concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now returns the history's clock: nanoseconds since it began.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// At converts a history time to wall-clock time.
func (h *History) At(ns int64) time.Time { return h.start.Add(time.Duration(ns)) }

// Add records op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the operations, ordered by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// WriteFile writes the history as JSON lines.
func (h *History) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range h.Ops() {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ErrorKind names the kind of a transport-level error: "timeout",
// "refused", "reset", "eof" or "other".
func ErrorKind(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case strings.Contains(err.Error(), "EOF"):
		return "eof"
	case strings.Contains(err.Error(), "deadline exceeded"):
		return "timeout"
	}
	return "other"
}

// Porcupine returns the history's operations for porcupine, each with
// an input and output of the models (FindingModel, ConfigModel). Reads
// that failed tell nothing and are left out, as are inserts whose outcome
// is unknown (no one knows their uid, so no other operation touches
// them). Writes of unique values whose outcome is unknown and whose value
// no read returned are left out too: placing such a write last (never
// observed) linearizes it in any linearization of the others, so the
// check is the same, and much faster. The other unknown writes get the
// largest return time: they may take effect any time after their call.
func Porcupine(ops []Op) []porcupine.Operation {
	observed := make(map[string]bool)
	for _, op := range ops {
		// A read, or a patch's answer (which reads the finding after the
		// patch applied, and may show a later concurrent patch).
		if op.OK() && (!op.Write() || op.Kind == OpPatch) && op.Read != "" {
			observed[op.Key+"\x00"+op.Read] = true
		}
	}
	var out []porcupine.Operation
	for _, op := range ops {
		definite := !op.Unknown()
		if op.Kind == OpPatch && definite && op.OK() {
			// A PATCH answers the finding as this node reads it after
			// the patch applied, which may already hold a later
			// concurrent patch (master.OnLeaderWrite): the answer is a
			// read somewhere in the call, not the patch's own result.
			// (Checked as an independent read, it may also be placed
			// before the patch itself: a slightly weaker check.)
			out = append(out,
				porcupine.Operation{ClientId: op.Client, Input: Input{Kind: OpPatch, Key: op.Key, Value: op.Value},
					Call: op.Call, Output: Output{Status: op.Status}, Return: op.Return},
				porcupine.Operation{ClientId: op.Client, Input: Input{Kind: OpGet, Key: op.Key},
					Call: op.Call, Output: Output{Status: op.Status, Read: op.Read}, Return: op.Return})
			continue
		}
		switch {
		case !op.Write() && !definite:
			continue
		case op.Kind == OpInsert && !definite:
			continue
		case (op.Kind == OpPatch || op.Kind == OpEdit) && !definite && !observed[op.Key+"\x00"+op.Value]:
			continue
		}
		ret := op.Return
		if !definite {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    Input{Kind: op.Kind, Key: op.Key, Value: op.Value},
			Call:     op.Call,
			Output:   Output{Unknown: !definite, Status: op.Status, Read: op.Read, Resent: op.Resent},
			Return:   ret,
		})
	}
	return out
}

// Input is a model operation's input.
type Input struct {
	Kind, Key, Value string
}

// Output is a model operation's output.
type Output struct {
	Unknown bool
	Status  int
	Read    string
	// Resent: see Op.Resent.
	Resent bool
}

// String describes an output for the visualization.
func (o Output) String() string {
	if o.Unknown {
		return "unknown"
	}
	if o.Read != "" {
		return fmt.Sprintf("%d %q", o.Status, o.Read)
	}
	return fmt.Sprint(o.Status)
}
