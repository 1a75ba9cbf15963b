package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/master/auth"
)

// Pattern is the route prefix of the fleet API; mount the handler on it.
const Pattern = "/squall/v1/fleet"

// Roles of the fleet's members.
const (
	RoleMaster    = "master"
	RoleEngine    = "engine"
	RoleSatellite = "satellite"
)

// Limits of a heartbeat.
const (
	maxBody    = 16 << 10
	maxReasons = 32
	maxText    = 256
)

// Report is a heartbeat of an engine or a satellite.
type Report struct {
	ID      string   `json:"id"`
	Role    string   `json:"role"`
	Site    string   `json:"site"`
	Version string   `json:"version"`
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
	// Warnings say what a member that works wants an operator to know
	// (an engine that refused the active tree and runs the previous one).
	Warnings []string `json:"warnings,omitempty"`
	// ConsumerLag is an engine's lag in events, summed over its
	// partitions; nil when unknown.
	ConsumerLag *int64 `json:"consumer_lag"`
	// SpoolDepth is the number of events a satellite holds for Kafka.
	SpoolDepth *int64 `json:"spool_depth"`
	// WebhooksLoaded is the number of webhooks a satellite serves.
	WebhooksLoaded *int64 `json:"webhooks_loaded"`
}

// Master is a master as the cluster's configuration knows it.
type Master struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	Voter    bool
	Leader   bool
}

// Health values of a master in the list.
const (
	HealthReady       = "ready"
	HealthNotReady    = "not_ready"
	HealthUnreachable = "unreachable"
)

// Member is one entry of the fleet's list.
type Member struct {
	Report
	// LastSeenMS is when the member last reported (epoch milliseconds);
	// for masters, when the list was made.
	LastSeenMS int64 `json:"last_seen_ms"`
	// Stale reports a member that has not reported for StaleAfter.
	Stale bool `json:"stale"`
	// Masters only: the cluster configuration's view (Leader, addresses,
	// suffrage), then what the master itself answered when the list was
	// made (see probeMaster): its health, raft state and indexes, and its
	// version in Report.Version.
	Leader       bool    `json:"leader,omitempty"`
	RaftAddr     string  `json:"raft_addr,omitempty"`
	HTTPAddr     string  `json:"http_addr,omitempty"`
	Suffrage     string  `json:"suffrage,omitempty"`
	Health       string  `json:"health,omitempty"`
	State        string  `json:"state,omitempty"`
	Term         *uint64 `json:"term,omitempty"`
	CommitIndex  *uint64 `json:"commit_index,omitempty"`
	AppliedIndex *uint64 `json:"applied_index,omitempty"`
}

// Config holds the fleet's settings.
type Config struct {
	// StaleAfter is how long after its last report a member is stale.
	StaleAfter time.Duration
	// DropAfter is how long after its last report a member is dropped.
	DropAfter time.Duration
	// MaxMembers bounds the engines and satellites kept; a report of a
	// new member beyond it is refused (503) until others are dropped.
	MaxMembers int
	// ProbeTimeout bounds how long the list waits for each master's own
	// answers (they are asked in parallel); one that does not answer in
	// time is listed as unreachable.
	ProbeTimeout time.Duration
	// Client asks the masters; nil is a plain HTTP client. Masters speak
	// plain HTTP to each other (as when forwarding to the leader).
	Client *http.Client
}

// Default returns the default settings: heartbeats are expected every
// 10 seconds.
func Default() Config {
	return Config{StaleAfter: 30 * time.Second, DropAfter: 5 * time.Minute, MaxMembers: 1000, ProbeTimeout: 2 * time.Second}
}

// Tokens verifies bearer tokens (auth.Verifier).
type Tokens interface {
	Verify(header string) (*auth.Claims, error)
}

var _ Tokens = (*auth.Verifier)(nil)

// Fleet keeps the reports and serves the API.
type Fleet struct {
	cfg     Config
	tokens  Tokens
	masters func(context.Context) ([]Master, error)
	logger  *slog.Logger

	mu      sync.Mutex
	members map[string]entry // by role/id
}

type entry struct {
	report Report
	seen   time.Time
}

// New returns a fleet whose masters come from masters.
func New(cfg Config, tokens Tokens, masters func(context.Context) ([]Master, error), logger *slog.Logger) *Fleet {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = Default().ProbeTimeout
	}
	return &Fleet{cfg: cfg, tokens: tokens, masters: masters, logger: logger.With("component", "fleet"), members: map[string]entry{}}
}

// ErrFull is returned by Report for a new member when MaxMembers are kept.
var ErrFull = errors.New("the fleet list is full")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Validate checks a report's fields.
func (r *Report) Validate() error {
	switch {
	case r.Role != RoleEngine && r.Role != RoleSatellite:
		return &FieldError{"role", fmt.Sprintf("%q: want %s or %s", r.Role, RoleEngine, RoleSatellite)}
	case !idPattern.MatchString(r.ID):
		return &FieldError{"id", "want 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"}
	case len(r.Site) > maxText:
		return &FieldError{"site", fmt.Sprintf("longer than %d bytes", maxText)}
	case len(r.Version) > maxText:
		return &FieldError{"version", fmt.Sprintf("longer than %d bytes", maxText)}
	}
	for field, list := range map[string][]string{"reasons": r.Reasons, "warnings": r.Warnings} {
		if len(list) > maxReasons {
			return &FieldError{field, fmt.Sprintf("more than %d", maxReasons)}
		}
		for _, s := range list {
			if len(s) > maxText {
				return &FieldError{field, fmt.Sprintf("an entry longer than %d bytes", maxText)}
			}
		}
	}
	for name, v := range map[string]*int64{"consumer_lag": r.ConsumerLag, "spool_depth": r.SpoolDepth, "webhooks_loaded": r.WebhooksLoaded} {
		if v != nil && *v < 0 {
			return &FieldError{name, "negative"}
		}
	}
	return nil
}

// FieldError is a report field with a bad value.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Report records r (valid) as seen at now.
func (f *Fleet) Report(r Report, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweep(now)
	key := r.Role + "/" + r.ID
	if _, ok := f.members[key]; !ok && len(f.members) >= f.cfg.MaxMembers {
		return ErrFull
	}
	r.Reasons = slices.Clone(r.Reasons)
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	f.members[key] = entry{report: r, seen: now}
	return nil
}

// sweep drops the members not seen for DropAfter. f.mu is held.
func (f *Fleet) sweep(now time.Time) {
	for k, e := range f.members {
		if now.Sub(e.seen) >= f.cfg.DropAfter {
			delete(f.members, k)
		}
	}
}

// List returns the masters, then the engines and satellites by role and
// id. Each master with an HTTP address is asked for its own state with
// the authorization header given (the caller's, which holds view on the
// root, as the list needs); an empty header asks only for readiness.
func (f *Fleet) List(ctx context.Context, now time.Time, authorization string) ([]Member, error) {
	masters, err := f.masters(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet masters: %w", err)
	}
	out := make([]Member, len(masters))
	var wg sync.WaitGroup
	for i, m := range masters {
		suffrage := "voter"
		if !m.Voter {
			suffrage = "nonvoter"
		}
		out[i] = Member{Report: Report{ID: m.ID, Role: RoleMaster, Reasons: []string{}},
			LastSeenMS: now.UnixMilli(), Leader: m.Leader, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Suffrage: suffrage}
		wg.Go(func() { f.probeMaster(ctx, &out[i], authorization) })
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	f.mu.Lock()
	f.sweep(now)
	rest := make([]Member, 0, len(f.members))
	for _, e := range f.members {
		rest = append(rest, Member{Report: e.report, LastSeenMS: e.seen.UnixMilli(), Stale: now.Sub(e.seen) >= f.cfg.StaleAfter})
	}
	f.mu.Unlock()
	slices.SortFunc(rest, func(a, b Member) int {
		return strings.Compare(a.Role+"/"+a.ID, b.Role+"/"+b.ID)
	})
	return append(out, rest...), nil
}

// Handler serves GET (and HEAD) /squall/v1/fleet, the list, which needs
// view on the root, and PUT /squall/v1/fleet/{role}/{id}, a heartbeat,
// which needs fleet_report on the root. Other methods are answered 405
// with Allow, other paths 404, both with a JSON error.
func (f *Fleet) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, Pattern)
		role, id, two := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		switch {
		case ok && rest == "":
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				f.notAllowed(w, r, "GET, HEAD")
				return
			}
			f.serveList(w, r)
		case ok && strings.HasPrefix(rest, "/") && two && role != "" && id != "" && !strings.Contains(id, "/"):
			if r.Method != http.MethodPut {
				f.notAllowed(w, r, "PUT")
				return
			}
			r.SetPathValue("role", role)
			r.SetPathValue("id", id)
			f.serveReport(w, r)
		default:
			f.fail(w, r, &apiError{http.StatusNotFound, "NOT_FOUND", nil, "no such endpoint: " + r.Method + " " + r.URL.Path})
		}
	})
}

// notAllowed answers 405 with the methods the path allows.
func (f *Fleet) notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	f.fail(w, r, &apiError{http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", map[string]string{"ALLOW": allow},
		fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)})
}

// authorize checks that the request's token has an authorization on the
// root that grants p.
func (f *Fleet) authorize(r *http.Request, p auth.Permission) error {
	c, err := f.tokens.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	return c.OnRoot(p)
}

func (f *Fleet) serveList(w http.ResponseWriter, r *http.Request) {
	if err := f.authorize(r, auth.View); err != nil {
		f.fail(w, r, err)
		return
	}
	members, err := f.List(r.Context(), time.Now(), r.Header.Get("Authorization"))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Members []Member `json:"members"`
	}{members})
}

// serveReport reads a heartbeat: the token first, then the content type,
// then at most maxBody bytes of JSON with no unknown field.
func (f *Fleet) serveReport(w http.ResponseWriter, r *http.Request) {
	if err := f.authorize(r, auth.FleetReport); err != nil {
		f.fail(w, r, err)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		f.fail(w, r, &apiError{http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", nil, "want Content-Type application/json"})
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			f.fail(w, r, &apiError{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", nil, fmt.Sprintf("a heartbeat is at most %d bytes", maxBody)})
			return
		}
		f.fail(w, r, &apiError{http.StatusBadRequest, "BAD_REQUEST", nil, "invalid JSON: " + err.Error()})
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		f.fail(w, r, &apiError{http.StatusBadRequest, "BAD_REQUEST", nil, "invalid JSON: data after the object"})
		return
	}
	if rep.Role == "" {
		rep.Role = r.PathValue("role")
	}
	if rep.ID == "" {
		rep.ID = r.PathValue("id")
	}
	if rep.Role != r.PathValue("role") || rep.ID != r.PathValue("id") {
		f.fail(w, r, &apiError{http.StatusBadRequest, "INVALID_FIELD", map[string]string{"FIELD": "id"}, "the body's role and id differ from the path's"})
		return
	}
	if err := rep.Validate(); err != nil {
		fe, _ := errors.AsType[*FieldError](err)
		f.fail(w, r, &apiError{http.StatusBadRequest, "INVALID_FIELD", map[string]string{"FIELD": fe.Field}, err.Error()})
		return
	}
	if err := f.Report(rep, time.Now()); err != nil {
		f.fail(w, r, &apiError{http.StatusServiceUnavailable, "FLEET_FULL", map[string]string{"MAX": fmt.Sprint(f.cfg.MaxMembers)}, err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, nil)
}

// apiError is an answer's status and JSON error body.
type apiError struct {
	status  int
	code    string
	params  map[string]string
	message string
}

func (e *apiError) Error() string { return e.message }

// fail writes err as the JSON error of every Squall API.
func (f *Fleet) fail(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := errors.AsType[*apiError](err)
	switch {
	case ok:
	case errors.Is(err, auth.ErrUnauthenticated):
		e = &apiError{http.StatusUnauthorized, "UNAUTHORIZED", nil, err.Error()}
	case errors.Is(err, auth.ErrForbidden):
		e = &apiError{http.StatusForbidden, "MISSING_REQUIRED_PERMISSIONS", nil, err.Error()}
	default:
		f.logger.Error("fleet request", "method", r.Method, "path", r.URL.Path, "err", err)
		e = &apiError{http.StatusInternalServerError, "INTERNAL", nil, "internal error"}
	}
	if e.params == nil {
		e.params = map[string]string{}
	}
	writeJSON(w, e.status, struct {
		Code    string            `json:"code"`
		Params  map[string]string `json:"params"`
		Message string            `json:"message"`
	}{e.code, e.params, e.message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
