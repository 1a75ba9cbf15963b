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
	// RoleGroup names a consumer group of engines in the path of a
	// removal (DELETE /squall/v1/fleet/group/{name}).
	RoleGroup = "group"
)

// Limits of a heartbeat.
const (
	// maxBody bounds a heartbeat; one with tree stats may hold
	// MaxStatsEntries of them.
	maxBody    = 2 << 20
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
	// KafkaGroup and KafkaTopic are an engine's consumer group and the
	// topic it consumes; Partitions the partitions of the topic the
	// group assigned to it (none while it is not in the group), and
	// TopicPartitions the topic's partition count as it last read it (nil
	// when unknown). The masters compare them to find the partitions of a
	// group that no live engine owns (Groups).
	KafkaGroup      string `json:"kafka_group,omitempty"`
	KafkaTopic      string `json:"kafka_topic,omitempty"`
	Partitions      []int  `json:"partitions,omitempty"`
	TopicPartitions *int64 `json:"topic_partitions,omitempty"`
	// TreeStats are an engine's counters of the tree it runs
	// (treestats.go); nil when it sends none.
	TreeStats *TreeStats `json:"tree_stats,omitempty"`
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
	// EventsPerSecond is an engine's rate of events evaluated between its
	// last two heartbeats with tree stats; absent when unknown.
	EventsPerSecond *float64 `json:"events_per_second,omitempty"`
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
	// MaxPerReporter bounds the members one reporter (the user its token
	// names) holds in the list, so that one token cannot fill it; 0 is
	// MaxMembers.
	MaxPerReporter int
	// Leading reports whether this node is the leader, which alone takes
	// the heartbeats; elsewhere the list's groups and the metrics say
	// nothing. Nil: always.
	Leading func() bool
	// ProbeTimeout bounds how long the list waits for each master's own
	// answers (they are asked in parallel); one that does not answer in
	// time is listed as unreachable.
	ProbeTimeout time.Duration
	// Client asks the masters; nil is a plain HTTP client. Masters speak
	// plain HTTP to each other (as when forwarding to the leader).
	Client *http.Client
	// Stats, when set, takes the engines' tree stats; the list keeps
	// only their events per second.
	Stats StatsSink
}

// Default returns the default settings: heartbeats are expected every
// 10 seconds.
func Default() Config {
	return Config{StaleAfter: 30 * time.Second, DropAfter: 5 * time.Minute, MaxMembers: 1000, MaxPerReporter: DefaultMaxPerReporter,
		ProbeTimeout: 2 * time.Second}
}

// DefaultMaxPerReporter is the default bound of the members of one
// reporter: a quarter of the list.
const DefaultMaxPerReporter = 250

// Bounds of the consumer groups the list follows, and of an engine's
// partitions.
const (
	maxGroups            = 64
	maxGroupsPerReporter = 8
	maxPartitions        = 10000
)

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
	members map[string]entry  // by role/id
	groups  map[string]*group // consumer groups, by name
}

// entry is a member's last report, when it came and who sent it: the
// user of the token of its first report, who alone may report it again
// (until it is dropped or an admin removes it).
type entry struct {
	report Report
	seen   time.Time
	owner  string
	rate   eventRate
}

// group is a consumer group of engines the list follows: known from the
// first report of an engine in it, kept (past its engines' drop) until an
// admin removes it, so that a group whose engines all died keeps saying
// that its partitions have no owner.
type group struct {
	topic      string
	partitions int64 // the topic's partition count, last reported; 0 unknown
	seen       time.Time
	owner      string
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
	if cfg.MaxPerReporter <= 0 {
		cfg.MaxPerReporter = cfg.MaxMembers
	}
	return &Fleet{cfg: cfg, tokens: tokens, masters: masters, logger: logger.With("component", "fleet"),
		members: map[string]entry{}, groups: map[string]*group{}}
}

// Errors of Report.
var (
	// ErrFull: a new member while MaxMembers are kept.
	ErrFull = errors.New("the fleet list is full")
	// ErrReporterFull: a new member (or consumer group) of a reporter
	// that holds as many as it may.
	ErrReporterFull = errors.New("this reporter holds as many fleet members as it may")
	// ErrNotOwner: a report of a member another reporter reports.
	ErrNotOwner = errors.New("another reporter reports this member")
)

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
	if r.TreeStats != nil {
		if r.Role != RoleEngine {
			return &FieldError{"tree_stats", "only engines send them"}
		}
		if err := r.TreeStats.Validate(); err != nil {
			return &FieldError{"tree_stats", err.Error()}
		}
	}
	return r.validateKafka()
}

// validateKafka checks an engine's consumer group fields.
func (r *Report) validateKafka() error {
	switch {
	case len(r.KafkaGroup) > maxText:
		return &FieldError{"kafka_group", fmt.Sprintf("longer than %d bytes", maxText)}
	case len(r.KafkaTopic) > maxText:
		return &FieldError{"kafka_topic", fmt.Sprintf("longer than %d bytes", maxText)}
	case r.KafkaGroup == "" && (r.KafkaTopic != "" || r.Partitions != nil || r.TopicPartitions != nil):
		return &FieldError{"kafka_group", "empty while kafka_topic, partitions or topic_partitions is set"}
	case r.Role != RoleEngine && r.KafkaGroup != "":
		return &FieldError{"kafka_group", "only engines consume"}
	case r.TopicPartitions != nil && (*r.TopicPartitions < 0 || *r.TopicPartitions > maxPartitions):
		return &FieldError{"topic_partitions", fmt.Sprintf("want 0 to %d", maxPartitions)}
	case len(r.Partitions) > maxPartitions:
		return &FieldError{"partitions", fmt.Sprintf("more than %d", maxPartitions)}
	}
	for _, p := range r.Partitions {
		if p < 0 || p >= maxPartitions || r.TopicPartitions != nil && int64(p) >= *r.TopicPartitions {
			return &FieldError{"partitions", fmt.Sprintf("%d: want 0 to topic_partitions - 1", p)}
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

// Report records r (valid), sent by the reporter owner, as seen at now.
// A member is bound to the reporter of its first report: another one gets
// ErrNotOwner until the member is dropped or removed. A new member beyond
// MaxMembers is ErrFull, beyond MaxPerReporter of its reporter
// ErrReporterFull (and a new consumer group beyond the groups' bounds).
func (f *Fleet) Report(r Report, owner string, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweep(now)
	key := r.Role + "/" + r.ID
	if e, ok := f.members[key]; ok {
		if e.owner != owner {
			return ErrNotOwner
		}
	} else {
		if len(f.members) >= f.cfg.MaxMembers {
			return ErrFull
		}
		if f.countLocked(owner) >= f.cfg.MaxPerReporter {
			return ErrReporterFull
		}
	}
	if err := f.groupLocked(r, owner, now); err != nil {
		return err
	}
	r.Reasons = slices.Clone(r.Reasons)
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	r.Partitions = slices.Clone(r.Partitions)
	var rate eventRate
	if st := r.TreeStats; st != nil {
		rate = f.members[key].rate.next(st, now)
		if f.cfg.Stats != nil {
			f.cfg.Stats.AddTreeStats(r.ID, st, now)
		}
		r.TreeStats = nil
	}
	f.members[key] = entry{report: r, seen: now, owner: owner, rate: rate}
	return nil
}

// countLocked returns the members owner holds. f.mu is held.
func (f *Fleet) countLocked(owner string) int {
	n := 0
	for _, e := range f.members {
		if e.owner == owner {
			n++
		}
	}
	return n
}

// groupLocked records the consumer group an engine's report names: a new
// group is bound to its first reporter, and bounded (maxGroups in all,
// maxGroupsPerReporter each); a known one takes the topic and the
// partition count from its first reporter. f.mu is held.
func (f *Fleet) groupLocked(r Report, owner string, now time.Time) error {
	if r.KafkaGroup == "" {
		return nil
	}
	g := f.groups[r.KafkaGroup]
	if g == nil {
		if len(f.groups) >= maxGroups {
			return ErrFull
		}
		n := 0
		for _, g := range f.groups {
			if g.owner == owner {
				n++
			}
		}
		if n >= maxGroupsPerReporter {
			return ErrReporterFull
		}
		g = &group{owner: owner}
		f.groups[r.KafkaGroup] = g
	}
	g.seen = now
	if g.owner != owner {
		// Engines of other reporters may share the group; only its
		// first reporter's say what the topic is.
		return nil
	}
	if r.KafkaTopic != "" {
		g.topic = r.KafkaTopic
	}
	if r.TopicPartitions != nil && *r.TopicPartitions > 0 {
		g.partitions = *r.TopicPartitions
	}
	return nil
}

// Remove forgets the member role/id, or with role "group" the consumer
// group id; it reports whether there was one.
func (f *Fleet) Remove(role, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if role == RoleGroup {
		_, ok := f.groups[id]
		delete(f.groups, id)
		return ok
	}
	key := role + "/" + id
	_, ok := f.members[key]
	delete(f.members, key)
	return ok
}

// sweep drops the members not seen for DropAfter. f.mu is held.
func (f *Fleet) sweep(now time.Time) {
	for k, e := range f.members {
		if now.Sub(e.seen) >= f.cfg.DropAfter {
			delete(f.members, k)
		}
	}
}

// Group is a consumer group of engines as the list sees it.
type Group struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Partitions is the topic's partition count as the group's engines
	// last reported it; 0 when none did.
	Partitions int64 `json:"partitions"`
	// Engines counts the group's engines that are not stale.
	Engines int `json:"engines"`
	// Unowned lists the partitions no engine that is not stale owns:
	// their events wait (all of them when every engine of the group is
	// stale or gone).
	Unowned []int `json:"unowned"`
	// LastSeenMS is when an engine of the group last reported.
	LastSeenMS int64 `json:"last_seen_ms"`
}

// leading reports whether this node takes the heartbeats.
func (f *Fleet) leading() bool { return f.cfg.Leading == nil || f.cfg.Leading() }

// Groups returns the consumer groups the engines reported, by name, each
// with the partitions that no live (not stale) engine owns; nothing on a
// node that is not the leader (its reports are old).
func (f *Fleet) Groups(now time.Time) []Group {
	if !f.leading() {
		return []Group{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweep(now)
	owned := make(map[string]map[int]bool, len(f.groups))
	engines := make(map[string]int, len(f.groups))
	for _, e := range f.members {
		name := e.report.KafkaGroup
		if name == "" || now.Sub(e.seen) >= f.cfg.StaleAfter {
			continue
		}
		engines[name]++
		if owned[name] == nil {
			owned[name] = map[int]bool{}
		}
		for _, p := range e.report.Partitions {
			owned[name][p] = true
		}
	}
	out := make([]Group, 0, len(f.groups))
	for name, g := range f.groups {
		unowned := []int{}
		for p := range int(g.partitions) {
			if !owned[name][p] {
				unowned = append(unowned, p)
			}
		}
		out = append(out, Group{Group: name, Topic: g.topic, Partitions: g.partitions, Engines: engines[name],
			Unowned: unowned, LastSeenMS: g.seen.UnixMilli()})
	}
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.Group, b.Group) })
	return out
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
		rest = append(rest, Member{Report: e.report, LastSeenMS: e.seen.UnixMilli(), Stale: now.Sub(e.seen) >= f.cfg.StaleAfter,
			EventsPerSecond: e.rate.perSec})
	}
	f.mu.Unlock()
	slices.SortFunc(rest, func(a, b Member) int {
		return strings.Compare(a.Role+"/"+a.ID, b.Role+"/"+b.ID)
	})
	return append(out, rest...), nil
}

// Handler serves GET (and HEAD) /squall/v1/fleet, the list, which needs
// view on the root; PUT /squall/v1/fleet/{role}/{id}, a heartbeat, which
// needs fleet_report on the root; and DELETE /squall/v1/fleet/{role}/{id},
// the removal of a member (or, with role "group", of a consumer group),
// which needs admin on the root. Other methods are answered 405 with
// Allow, other paths 404, both with a JSON error.
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
			r.SetPathValue("role", role)
			r.SetPathValue("id", id)
			switch r.Method {
			case http.MethodPut:
				f.serveReport(w, r)
			case http.MethodDelete:
				f.serveRemove(w, r)
			default:
				f.notAllowed(w, r, "PUT, DELETE")
			}
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
// root that grants p, and returns the token's user.
func (f *Fleet) authorize(r *http.Request, p auth.Permission) (string, error) {
	c, err := f.tokens.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return "", err
	}
	return c.User, c.OnRoot(p)
}

func (f *Fleet) serveList(w http.ResponseWriter, r *http.Request) {
	if _, err := f.authorize(r, auth.View); err != nil {
		f.fail(w, r, err)
		return
	}
	now := time.Now()
	members, err := f.List(r.Context(), now, r.Header.Get("Authorization"))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Members []Member `json:"members"`
		Groups  []Group  `json:"groups"`
	}{members, f.Groups(now)})
}

// serveRemove forgets a member, or a consumer group: a stale or forged
// entry an admin wants gone. The token first, then the path.
func (f *Fleet) serveRemove(w http.ResponseWriter, r *http.Request) {
	if _, err := f.authorize(r, auth.Admin); err != nil {
		f.fail(w, r, err)
		return
	}
	role, id := r.PathValue("role"), r.PathValue("id")
	if role != RoleEngine && role != RoleSatellite && role != RoleGroup {
		f.fail(w, r, &apiError{http.StatusBadRequest, "INVALID_FIELD", map[string]string{"FIELD": "role"},
			fmt.Sprintf("%q: want %s, %s or %s", role, RoleEngine, RoleSatellite, RoleGroup)})
		return
	}
	if !f.Remove(role, id) {
		f.fail(w, r, &apiError{http.StatusNotFound, "NOT_FOUND", map[string]string{"ROLE": role, "ID": id},
			fmt.Sprintf("the fleet list has no %s %q", role, id)})
		return
	}
	f.logger.Info("fleet entry removed", "role", role, "id", id)
	writeJSON(w, http.StatusOK, nil)
}

// serveReport reads a heartbeat: the token first, then the content type,
// then at most maxBody bytes of JSON with no unknown field.
func (f *Fleet) serveReport(w http.ResponseWriter, r *http.Request) {
	owner, err := f.authorize(r, auth.FleetReport)
	if err != nil {
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
	switch err := f.Report(rep, owner, time.Now()); {
	case errors.Is(err, ErrNotOwner):
		f.fail(w, r, &apiError{http.StatusForbidden, "NOT_OWNER", map[string]string{"ROLE": rep.Role, "ID": rep.ID},
			fmt.Sprintf("%s %q is reported by a token of another user; it is dropped after %s without a heartbeat, or an admin removes it: DELETE %s/%s/%s",
				rep.Role, rep.ID, f.cfg.DropAfter, Pattern, rep.Role, rep.ID)})
		return
	case errors.Is(err, ErrReporterFull):
		f.fail(w, r, &apiError{http.StatusServiceUnavailable, "FLEET_REPORTER_FULL",
			map[string]string{"MAX": fmt.Sprint(f.cfg.MaxPerReporter), "MAX_GROUPS": fmt.Sprint(maxGroupsPerReporter)},
			fmt.Sprintf("the user %q reports %d members (or %d consumer groups) already, as many as one reporter may; give other members tokens of another user, or raise --fleet-max-per-reporter",
				owner, f.cfg.MaxPerReporter, maxGroupsPerReporter)})
		return
	case err != nil:
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
