package store

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the store. Match them with errors.Is; the typed errors below
// carry details and match their sentinel with errors.Is too.
var (
	// ErrNotLeader means the operation needs the leader and this node is not
	// it. The error is a *NotLeaderError naming the leader when one is known.
	ErrNotLeader = errors.New("not the leader")
	// ErrLeadershipLost means this node lost leadership while a command was
	// in flight: the command may or may not have been committed. It comes
	// wrapped in a *NotLeaderError, so it matches ErrNotLeader too.
	ErrLeadershipLost = errors.New("leadership lost while applying; the command may still commit")
	// ErrTimeout means raft could not accept the operation in time (its
	// queue is full or the cluster has no quorum).
	ErrTimeout = errors.New("raft operation timed out")
	// ErrNoTransferTarget means leadership cannot be transferred: this
	// node is the only voter.
	ErrNoTransferTarget = errors.New("no other voter to transfer leadership to")
	// ErrNotOpen means the store has not been opened yet.
	ErrNotOpen = errors.New("store is not open")
	// ErrClosed means the store has been closed.
	ErrClosed = errors.New("store is closed")
	// ErrNoDraft means there is no draft with the given id.
	ErrNoDraft = errors.New("no such draft")
	// ErrNoFinding means the tenant has no finding with the given uid.
	ErrNoFinding = errors.New("no such finding")
	// ErrNotOwner means the draft belongs to somebody else. The error is a
	// *NotOwnerError naming the owner.
	ErrNotOwner = errors.New("not the draft owner")
	// ErrInvalidTree means a tree was refused because it does not decode or
	// does not pass config.Validate; the config error is wrapped beside it.
	ErrInvalidTree = errors.New("invalid tree")
	// ErrInvalidCommand means a command was refused before it was submitted
	// (a missing id, user or tree, or a nested batch).
	ErrInvalidCommand = errors.New("invalid command")
	// ErrInvalidBackup means a backup file is malformed (its trees are
	// ErrInvalidTree instead); a restore of it changes nothing.
	ErrInvalidBackup = errors.New("invalid backup file")
	// ErrUnreachable means a node asking to join could not be dialled on
	// its raft address, or failed the TLS handshake.
	ErrUnreachable = errors.New("cannot reach the node's raft address")
	// ErrOutOfScope means a scoped deploy was refused because the draft
	// differs from the active tree outside the deployer's scope. The error
	// is an *OutOfScopeError naming the differing paths.
	ErrOutOfScope = errors.New("the draft differs from the active tree outside the deployer's scope")
	// ErrUnknownMember means no cluster member has the given id.
	ErrUnknownMember = errors.New("unknown cluster member")
	// ErrIdentity means the certificate a joining node presents on its
	// raft address (raft mutual TLS) does not name the node's id.
	ErrIdentity = errors.New("the raft certificate does not name the joining node")
)

// NotLeaderError is returned by operations that need the leader when this
// node is not the leader. It matches ErrNotLeader with errors.Is.
type NotLeaderError struct {
	// LeaderID and LeaderAddr name the current leader, or are empty while
	// there is none (an election is under way).
	LeaderID   string
	LeaderAddr string
	// Err is the more specific cause, e.g. ErrLeadershipLost, or nil.
	Err error
}

// Error names the leader, if known, and the cause.
func (e *NotLeaderError) Error() string {
	msg := ErrNotLeader.Error()
	if e.LeaderAddr != "" {
		msg += fmt.Sprintf(" (leader is %s at %s)", e.LeaderID, e.LeaderAddr)
	} else {
		msg += " (no leader)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Unwrap returns the more specific cause, if any.
func (e *NotLeaderError) Unwrap() error { return e.Err }

// NotOwnerError is the result of a draft command issued by a user who does
// not own the draft. It matches ErrNotOwner with errors.Is.
type NotOwnerError struct {
	// DraftID is the draft's id and Owner its current owner.
	DraftID string
	Owner   string
	// Displaced is set when the caller owned the draft until Owner took
	// it over: then even its reads are refused.
	Displaced bool
}

// Error names the draft and its owner.
func (e *NotOwnerError) Error() string {
	if e.Displaced {
		return fmt.Sprintf("draft %s was taken over by %s: %s; take it over again or create a new draft", e.DraftID, e.Owner, ErrNotOwner)
	}
	return fmt.Sprintf("draft %s is owned by %s: %s", e.DraftID, e.Owner, ErrNotOwner)
}

// Is reports whether target is ErrNotOwner.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// OutOfScopeError is the result of a [DeployScoped] whose draft differs
// from the active tree outside its scope. It matches ErrOutOfScope.
type OutOfScopeError struct {
	// Scope is the deployer's node, Paths the differing paths (dot-joined,
	// at most 20).
	Scope []string
	Paths []string
}

// Error names the scope and the differing paths.
func (e *OutOfScopeError) Error() string {
	return fmt.Sprintf("%s: scope %s, differing paths %s", ErrOutOfScope, strings.Join(e.Scope, "."), strings.Join(e.Paths, ", "))
}

// Is reports whether target is ErrOutOfScope.
func (e *OutOfScopeError) Is(target error) bool { return target == ErrOutOfScope }
