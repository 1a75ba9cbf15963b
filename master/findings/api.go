package findings

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// Store is the replicated state the API reads and changes.
// *store.Store implements it.
type Store interface {
	InsertFinding(ctx context.Context, f store.Finding) (store.FindingOutcome, error)
	Finding(tenant, uid string) (store.Finding, error)
	Findings(tenant string, q store.FindingQuery) (store.FindingPage, error)
	// PatchFinding submits p with the request's session (nil: none).
	PatchFinding(ctx context.Context, sess *store.Session, p store.PatchFinding) error
}

var _ Store = (*store.Store)(nil)

// Verifier authenticates Authorization headers. *auth.Verifier implements it.
type Verifier interface {
	Verify(header string) (*auth.Claims, error)
}

var _ Verifier = (*auth.Verifier)(nil)

// Config holds the API's limits and, for tests, its clock and uid source.
type Config struct {
	// MaxBody bounds JSON request bodies (default 1 MiB).
	MaxBody int64
	// Now is the clock that dates new findings (default time.Now).
	Now func() time.Time
	// NewUID returns a new finding uid (default store.NewDraftID, a UUIDv7).
	NewUID func() (string, error)
	// Sealer, when set, encrypts passwords before they enter the raft log
	// (so the log, the state file and snapshots hold them encrypted), and
	// decrypts them on reads. Without it passwords are stored in clear.
	Sealer *Sealer
}

// Default returns the default configuration.
func Default() Config {
	return Config{MaxBody: 1 << 20, Now: time.Now, NewUID: store.NewDraftID}
}

// Paging limits of GET /findings/credential.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Prefix is the path prefix of every route of the API.
const Prefix = "/intel/api/sdk/v0/"

// Log attribute keys.
const (
	logMethod    = "method"
	logPath      = "path"
	logStatus    = "status"
	logCode      = "code"
	logError     = "error"
	logRequestID = "request_id"
	logTenant    = "tenant"
	logTraceID   = "trace_id"
	logParentID  = "parent_id"
	logDuration  = "duration"
)

// API serves the findings API.
type API struct {
	cfg    Config
	store  Store
	tokens Verifier
	logger *slog.Logger
	// clientErrs logs 4xx answers at debug level, with a summary at info.
	clientErrs *httpguard.ClientErrors
}

// New returns the API. logger may be nil.
func New(cfg Config, st Store, tokens Verifier, logger *slog.Logger) *API {
	d := Default()
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = d.MaxBody
	}
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.NewUID == nil {
		cfg.NewUID = d.NewUID
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "findings")
	return &API{cfg: cfg, store: st, tokens: newTokenCache(tokens), logger: logger, clientErrs: httpguard.NewClientErrors(logger, 0)}
}

// request is what a handler gets: the request, its tenant and its logger
// (carrying the trace context).
type request struct {
	*http.Request
	w      http.ResponseWriter
	tenant string
}

// handlerFunc returns the status and the body of a successful answer.
type handlerFunc func(r *request) (int, any, error)

// Handler returns the API's routes, rooted at Prefix.
func (a *API) Handler() http.Handler {
	// routes holds the routes; mux the same and a catch-all, so that a
	// request to a route is matched once, and only the others are
	// matched again, against routes, to tell 405 from 404.
	routes, mux := http.NewServeMux(), http.NewServeMux()
	const p = "/intel/api/sdk/v0"
	insert := a.wrap(a.insert, auth.FindingsWrite)
	for pattern, h := range map[string]http.Handler{
		insertPattern:                   insert,
		"GET " + p + "/finding/{uid}":   a.wrap(a.get, auth.FindingsRead),
		"PATCH " + p + "/finding/{uid}": a.wrap(a.patch, auth.FindingsWrite, auth.FindingsRead),
		"GET " + listPath:               a.wrap(a.list, auth.FindingsRead),
	} {
		routes.Handle(pattern, h)
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h, pattern := routes.Handler(r)
		if pattern != "" {
			// A route the catch-all matched first: a redirect of a
			// path to clean, for one.
			routes.ServeHTTP(w, r)
			return
		}
		e := apierror.NoRoute(h, w, r)
		if e.Status == http.StatusMethodNotAllowed && r.URL.Path == insertPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// The list is the singular path: say so to whoever reads
			// the plural one.
			e.Message += "; the findings are listed with GET " + listPath
			e.Params = map[string]string{"LIST_PATH": listPath}
		}
		a.finish(w, r, a.logger, time.Now(), "", 0, nil, e)
	})
	return &fastRoutes{insert: insert, mux: mux}
}

// The insert's route, and the list's path.
const (
	listPath      = "/intel/api/sdk/v0/findings/credential"
	insertPath    = "/intel/api/sdk/v0/findings/credentials"
	insertPattern = http.MethodPut + " " + insertPath
)

// fastRoutes serves the insert, the most frequent request, without
// matching it against the mux's patterns, and every other request with
// the mux. TestFastRoute checks that both answer alike.
type fastRoutes struct {
	insert http.Handler
	mux    *http.ServeMux
}

func (f *fastRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The mux matches the escaped path (RawPath, when set, differs from
	// Path's own escaping: findings%2Fcredentials is another path).
	if r.Method == http.MethodPut && r.URL.Path == insertPath && r.URL.RawPath == "" {
		r.Pattern = insertPattern
		f.insert.ServeHTTP(w, r)
		return
	}
	f.mux.ServeHTTP(w, r)
}

// Error is an error answer: {"code", "params", "message"} with a status
// (docs/decisions.md decision 16).
type Error = apierror.Error

// traceparent is the W3C trace-context header: version, trace id, parent
// id, flags.
var traceparent = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// traceLogger returns logger with the request's trace context, when its
// Traceparent header is valid (an invalid one is ignored, as the
// trace-context specification asks).
func traceLogger(logger *slog.Logger, r *http.Request) *slog.Logger {
	h := r.Header.Get("Traceparent")
	if h == "" {
		return logger
	}
	m := traceparent.FindStringSubmatch(strings.TrimSpace(h))
	if m == nil || m[1] == "ff" || m[2] == strings.Repeat("0", 32) || m[3] == strings.Repeat("0", 16) {
		return logger
	}
	return logger.With(logTraceID, m[2], logParentID, m[3])
}

// wrap authenticates the request, checks that the token grants perms on
// its tenant (decision 8: a patch answers the finding, so it needs to read
// as well as to write), runs fn, writes its answer and logs the request
// once, with its trace context.
func (a *API) wrap(fn handlerFunc, perms ...auth.Permission) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		logger := traceLogger(a.logger, r)
		claims, err := a.tokens.Verify(r.Header.Get("Authorization"))
		var tenant string
		if err == nil {
			var ok bool
			if tenant, ok = claims.FindingsTenant(); !ok {
				err = &Error{Status: http.StatusForbidden, Code: "NO_TENANT",
					Message: "the token names no single tenant: give it a \"tenant\" claim (squall token --tenant T), or scope all its authorizations below one tenant's node ([root, T, ...])"}
			}
		}
		for _, p := range perms {
			if err != nil {
				break
			}
			if e := claims.FindingsAllowed(tenant, p); e != nil {
				err = &Error{Status: http.StatusForbidden, Code: "FORBIDDEN", Params: map[string]string{"ROLE": string(p)}, Message: e.Error()}
			}
		}
		if err != nil {
			// Refused from the headers alone: the body is not read, not
			// even to reuse the connection.
			if r.Body != nil && r.Body != http.NoBody {
				w.Header().Set("Connection", "close")
			}
			a.finish(w, r, logger, start, "", 0, nil, err)
			return
		}
		// The audit log records the user with each change (decision 61).
		o := store.OriginFromContext(r.Context())
		o.User = claims.User
		r = r.WithContext(store.ContextWithOrigin(r.Context(), o))
		status, body, err := fn(&request{Request: r, w: w, tenant: tenant})
		a.finish(w, r, logger, start, tenant, status, body, err)
	})
}

// finish writes the answer and logs the request: failures at info (error
// for 5xx), successes at debug.
func (a *API) finish(w http.ResponseWriter, r *http.Request, logger *slog.Logger, start time.Time, tenant string, status int, body any, err error) {
	if err != nil {
		e := toError(err)
		if e.Status < 500 {
			a.clientErrs.Record(r.Context(), e.Status, e.Code, "request failed", logMethod, r.Method, logPath, r.URL.Path, logTenant, tenant,
				logError, e.Message, logDuration, time.Since(start))
			apierror.Write(w, e)
			return
		}
		pub, id := e.Public()
		attrs := []any{logMethod, r.Method, logPath, r.URL.Path, logTenant, tenant,
			logStatus, e.Status, logCode, e.Code, logError, e.Message, logDuration, time.Since(start)}
		if id != "" {
			attrs = append(attrs, logRequestID, id)
		}
		logger.Log(r.Context(), slog.LevelError, "request failed", attrs...)
		apierror.Write(w, pub)
		return
	}
	// Checked first: the attributes of a disabled record would still be
	// allocated, on every successful request.
	if logger.Enabled(r.Context(), slog.LevelDebug) {
		logger.Log(r.Context(), slog.LevelDebug, "request", logMethod, r.Method, logPath, r.URL.Path, logTenant, tenant,
			logStatus, status, logDuration, time.Since(start))
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	if u, ok := v.(uidBody); ok && plainUID(u.UID) {
		// The insert's answer, the most frequent, written without
		// reflection: the same bytes as json.Marshal's.
		b = append(append(append(make([]byte, 0, len(`{"uid":""}`)+len(u.UID)+1), `{"uid":"`...), u.UID...), "\"}\n"...)
	} else {
		apierror.WriteJSON(w, status, v)
		return
	}
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// plainUID reports whether uid is written in JSON as it is, between
// quotes: ASCII letters, digits and dashes (a UUID).
func plainUID(uid string) bool {
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// toError maps the errors of the layers below to answers.
func toError(err error) *Error {
	var fe *FieldError
	if e := apierror.Common(err); e != nil {
		return e
	}
	switch {
	case errors.As(err, &fe):
		return &Error{Status: http.StatusBadRequest, Code: fe.Code, Params: map[string]string{"FIELD": fe.Field}, Message: fe.Error()}
	case errors.Is(err, store.ErrNoFinding):
		return &Error{Status: http.StatusNotFound, Code: "FINDING_NOT_FOUND", Message: err.Error()}
	case errors.Is(err, errBadBody):
		return &Error{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Message: err.Error()}
	}
	return apierror.Internal(err)
}

// errBadBody marks a body that is not the JSON object a request needs.
var errBadBody = errors.New("bad request body")

// readJSON reads a JSON body of at most MaxBody bytes, checking its
// content type.
func (a *API) readJSON(r *request) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct != "application/json" {
		// The common header needs no parsing (and its map).
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, &Error{Status: http.StatusUnsupportedMediaType, Code: "UNSUPPORTED_MEDIA_TYPE", Message: fmt.Sprintf("the body must be sent with Content-Type: application/json (got %q)", ct)}
		}
	}
	body := http.MaxBytesReader(r.w, r.Body, a.cfg.MaxBody)
	if n := r.ContentLength; n > 0 && n <= a.cfg.MaxBody {
		// The announced length, read into a buffer of its size; the
		// server ends the body there (a short body is an error).
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(body)
}

// decode decodes a body strictly, marking errors that name no field.
func decode(body []byte, v any) error {
	err := decodeStrict(body, v)
	var fe *FieldError
	if err != nil && !errors.As(err, &fe) {
		return fmt.Errorf("%w: %w", errBadBody, err)
	}
	return err
}

// uidBody is the answer of an insert.
type uidBody struct {
	UID string `json:"uid"`
}

// Envelope is the answer of the list and get endpoints.
type Envelope struct {
	Total    int    `json:"total"`
	Page     int    `json:"page"`
	Limit    int    `json:"limit"`
	Findings []View `json:"findings"`
}

// HeaderDuplicate is set to "true" on the answer to an insert whose
// finding already existed (identical in tenant, domain, tool, resource,
// username and secret): the answer is 201 with that finding's uid, as for
// the first insert, and nothing changed.
const HeaderDuplicate = "X-Squall-Duplicate"

// insert is PUT /findings/credentials: 201 {"uid"}, of the new finding or
// of the identical finding that already existed (then with
// HeaderDuplicate: the spec has one success status for an insert).
func (a *API) insert(r *request) (int, any, error) {
	body, err := a.readJSON(r)
	if err != nil {
		return 0, nil, err
	}
	var b insertBody
	if err := decodeInsert(body, &b); err != nil {
		return 0, nil, err
	}
	f, err := b.toFinding()
	if err != nil {
		return 0, nil, err
	}
	if f.UID, err = a.cfg.NewUID(); err != nil {
		return 0, nil, err
	}
	f.Tenant = r.tenant
	if a.cfg.Sealer != nil {
		f.Password = a.cfg.Sealer.Seal(f.Tenant, f.Password)
	}
	f.DiscoveredMS = a.cfg.Now().UnixMilli()
	f.UpdatedMS = f.DiscoveredMS
	f.State = StateUnassigned
	out, err := a.store.InsertFinding(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	if out.Err != nil {
		return 0, nil, out.Err
	}
	if !out.Created {
		r.w.Header()[HeaderDuplicate] = []string{"true"}
	}
	return http.StatusCreated, uidBody{UID: out.UID}, nil
}

// view returns the API form of a stored finding, its password decrypted.
func (a *API) view(f store.Finding) (View, error) {
	pw, err := a.cfg.Sealer.open(f.Tenant, f.Password)
	if err != nil {
		return View{}, fmt.Errorf("finding %s: %w", f.UID, err)
	}
	f.Password = pw
	return ViewOf(f), nil
}

// one answers the envelope of one finding.
func (a *API) one(f store.Finding) (int, any, error) {
	v, err := a.view(f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, Envelope{Total: 1, Page: 1, Limit: 1, Findings: []View{v}}, nil
}

// get is GET /finding/{uid}.
func (a *API) get(r *request) (int, any, error) {
	f, err := a.store.Finding(r.tenant, r.PathValue("uid"))
	if err != nil {
		return 0, nil, err
	}
	return a.one(f)
}

// patch is PATCH /finding/{uid}: it answers the changed finding.
func (a *API) patch(r *request) (int, any, error) {
	body, err := a.readJSON(r)
	if err != nil {
		return 0, nil, err
	}
	p, err := decodePatch(body)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			err = fmt.Errorf("%w: %w", errBadBody, err)
		}
		return 0, nil, err
	}
	p.Tenant, p.UID, p.Now = r.tenant, r.PathValue("uid"), a.cfg.Now()
	if err := a.store.PatchFinding(r.Context(), store.SessionFromContext(r.Context()), p); err != nil {
		return 0, nil, err
	}
	f, err := a.store.Finding(r.tenant, p.UID)
	if err != nil {
		return 0, nil, err
	}
	return a.one(f)
}

// listParams are the query parameters of GET /findings/credential.
var listParams = []string{"page", "limit", "state", "tool", "monitored_domain", "username", "from", "to"}

// list is GET /findings/credential.
func (a *API) list(r *request) (int, any, error) {
	q, page, limit, err := parseList(r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	p, err := a.store.Findings(r.tenant, q)
	if err != nil {
		return 0, nil, err
	}
	env := Envelope{Total: p.Total, Page: page, Limit: limit, Findings: make([]View, 0, len(p.Findings))}
	for _, f := range p.Findings {
		v, err := a.view(f)
		if err != nil {
			return 0, nil, err
		}
		env.Findings = append(env.Findings, v)
	}
	return http.StatusOK, env, nil
}

// parseList parses the list query: page (from 1, default 1), limit (1 to
// MaxLimit, default DefaultLimit), state, tool, monitored_domain,
// username, from (inclusive) and to (exclusive) in epoch seconds.
// Unknown and repeated parameters are refused.
func parseList(v url.Values) (q store.FindingQuery, page, limit int, err error) {
	for k, vals := range v {
		if !slices.Contains(listParams, k) {
			return q, 0, 0, &FieldError{Code: "UNKNOWN_FIELD", Field: k, Reason: "is not a query parameter of this request (" + strings.Join(listParams, ", ") + ")"}
		}
		if len(vals) > 1 {
			return q, 0, 0, invalid(k, "is given %d times", len(vals))
		}
	}
	num := func(name string, def, lo, hi int64) (int64, error) {
		s := v.Get(name)
		if !v.Has(name) {
			return def, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, invalid(name, "must be an integer from %d to %d", lo, hi)
		}
		return n, nil
	}
	p, err := num("page", 1, 1, 1_000_000_000)
	if err != nil {
		return q, 0, 0, err
	}
	l, err := num("limit", DefaultLimit, 1, MaxLimit)
	if err != nil {
		return q, 0, 0, err
	}
	if q.MonitoredDomainID, err = num("monitored_domain", 0, 1, 1<<53); err != nil {
		return q, 0, 0, err
	}
	// Epoch seconds up to year 9999.
	const maxSec = 253402300799
	from, err := num("from", 0, 0, maxSec)
	if err != nil {
		return q, 0, 0, err
	}
	to, err := num("to", 0, 1, maxSec)
	if err != nil {
		return q, 0, 0, err
	}
	q.FromMS, q.ToMS = from*1000, to*1000
	if s := v.Get("state"); v.Has("state") {
		if !slices.Contains(States, s) {
			return q, 0, 0, invalid("state", "must be one of %s", strings.Join(States, ", "))
		}
		q.State = s
	}
	for name, dst := range map[string]*string{"tool": &q.ToolCode, "username": &q.Username} {
		if v.Has(name) {
			if *dst = v.Get(name); *dst == "" {
				return q, 0, 0, invalid(name, "must not be empty")
			}
		}
	}
	q.Offset, q.Limit = int((p-1)*l), int(l)
	return q, int(p), int(l), nil
}
