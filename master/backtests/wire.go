package backtests

import (
	"encoding/json"
	"time"

	"github.com/squallhq/squall/engine/backtest"
)

// Paths of the routes.
const (
	// Prefix is the collection: POST starts a backtest, GET lists them.
	Prefix = "/squall/v1/backtests"
	// ClaimPath is where engines claim a backtest.
	ClaimPath = Prefix + "/claim"
)

// States of a backtest.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Request is the body of POST /squall/v1/backtests: what to compare with
// the active tree (Draft or Version), over which range of the events
// topic (Last, Duration, or From and To), with how many differing events
// kept (Sample) and at most MaxEvents read.
type Request struct {
	// Draft is the id of the draft to try.
	Draft string `json:"draft,omitempty"`
	// Version is a version of the tree to try (1, 2, ...).
	Version uint64 `json:"version,omitempty"`
	// Last is the number of records to read at the end of each
	// partition.
	Last int64 `json:"last,omitempty"`
	// Duration is a Go duration ("1h", "30m"): the records of that long
	// before the request.
	Duration string `json:"duration,omitempty"`
	// From and To are RFC 3339 times: the records of [From, To). No To:
	// up to the request.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Sample is how many differing events the result keeps with both
	// outcomes (default 20; 0 is the default, -1 none).
	Sample int `json:"sample,omitempty"`
	// MaxEvents bounds the events read (default and maximum:
	// Config.MaxEvents).
	MaxEvents int64 `json:"max_events,omitempty"`
}

// Range is a backtest's range as the masters resolved it: Last records
// of each partition, or the records of [Since, Until).
type Range struct {
	Last  int64      `json:"last,omitempty"`
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// Progress is how far a running backtest is, as its engine last reported.
type Progress struct {
	// Read is the number of events read; Total those of the range (0
	// until the engine resolved it).
	Read  int64 `json:"read"`
	Total int64 `json:"total"`
	// Rate is the events read per second since the start.
	Rate float64 `json:"rate"`
	// ElapsedMS is the time since the engine started it.
	ElapsedMS int64 `json:"elapsed_ms"`
	// Held: the engine holds the backtest while its live pipeline lags
	// (its --backtest-max-lag).
	Held bool `json:"held,omitempty"`
}

// Backtest is a backtest as the API shows it.
type Backtest struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Draft or Version is what is compared with the active tree.
	Draft   string `json:"draft,omitempty"`
	Version uint64 `json:"version,omitempty"`
	// ActiveIndex is the state index of the active tree compared, and
	// ActiveVersion its version number when it has one.
	ActiveIndex   uint64 `json:"active_index"`
	ActiveVersion uint64 `json:"active_version,omitempty"`
	Range         Range  `json:"range"`
	Sample        int    `json:"sample"`
	MaxEvents     int64  `json:"max_events"`
	CreatedBy     string `json:"created_by"`
	// CreatedMS, StartedMS (claimed by an engine) and FinishedMS are Unix
	// milliseconds.
	CreatedMS  int64 `json:"created_ms"`
	StartedMS  int64 `json:"started_ms,omitempty"`
	FinishedMS int64 `json:"finished_ms,omitempty"`
	// Engine is the engine that runs it or ran it; Attempts the number of
	// engines that claimed it.
	Engine   string `json:"engine,omitempty"`
	Attempts int    `json:"attempts"`
	// CancelRequested: cancelled while running; the engine stops at its
	// next progress report and posts what it counted.
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	Progress        *Progress `json:"progress,omitempty"`
	// Error says why it failed (or why a cancelled one has no result).
	Error string `json:"error,omitempty"`
	// ResultTrimmed says what of the result was dropped to fit what the
	// masters keep of one (feature level 7: 1 MiB compressed).
	ResultTrimmed string `json:"result_trimmed,omitempty"`
	// Result is the result (partial when cancelled); only in GET of one
	// backtest.
	Result *backtest.Result `json:"result,omitempty"`
}

// List is the answer of GET /squall/v1/backtests, newest first, without
// results.
type List struct {
	Backtests []Backtest `json:"backtests"`
}

// Claim is the body of POST /squall/v1/backtests/claim.
type Claim struct {
	// Engine is the engine's id (its --name, as in the fleet list).
	Engine string `json:"engine"`
}

// Assignment is the answer of a claim that got a backtest: everything the
// engine needs to run it.
type Assignment struct {
	ID string `json:"id"`
	// Active and Candidate are the trees' export files.
	Active    json.RawMessage `json:"active"`
	Candidate json.RawMessage `json:"candidate"`
	Range     Range           `json:"range"`
	Sample    int             `json:"sample"`
	MaxEvents int64           `json:"max_events"`
}

// ProgressReport is the body of PUT .../{id}/progress.
type ProgressReport struct {
	Engine   string   `json:"engine"`
	Progress Progress `json:"progress"`
}

// ProgressAnswer is the answer to a progress report: Cancel asks the
// engine to stop and post what it counted.
type ProgressAnswer struct {
	Cancel bool `json:"cancel"`
}

// ResultReport is the body of PUT .../{id}/result: the result (partial
// when the run stopped early) and, when it failed or stopped, why.
type ResultReport struct {
	Engine string           `json:"engine"`
	Result *backtest.Result `json:"result,omitempty"`
	Error  string           `json:"error,omitempty"`
	// Release: the engine stops before the end; another engine may run
	// the backtest again (within the masters' attempts).
	Release bool `json:"release,omitempty"`
}
