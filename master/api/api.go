package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// Store is the replicated state the API reads and changes.
// *store.Store implements it.
type Store interface {
	Active() (*config.Node, uint64)
	// DraftView returns the draft without copying its tree, which the
	// API never modifies.
	DraftView() (*store.Draft, error)
	// NewDraftID returns a new draft id for CreateDraftID.
	NewDraftID() (string, error)
	// The writes take the request's session (nil: none), which makes a
	// resent request apply once (see store.Session).
	CreateDraftID(ctx context.Context, sess *store.Session, id, owner string) error
	EditDraftPart(ctx context.Context, sess *store.Session, id, user string, e *config.Edit) error
	TakeOver(ctx context.Context, sess *store.Session, id, user string) error
	DeployScoped(ctx context.Context, sess *store.Session, id, user string, scope []string) (uint64, error)
	// DeployVersion is DeployScoped recording a message with the version
	// the deploy makes.
	DeployVersion(ctx context.Context, sess *store.Session, id, user string, scope []string, message string) (uint64, error)
	// DeployTested is DeployVersion for a caller that ran the draft's
	// tests on the draft tested names: a draft changed since is refused.
	DeployTested(ctx context.Context, sess *store.Session, id, user string, scope []string, message string, tested store.Tested) (uint64, error)
	DeleteDraft(ctx context.Context, sess *store.Session, id, user string) error
}

var _ Store = (*store.Store)(nil)

// StateWrite reports whether r is a write whose whole effect is one
// change of the replicated state: every write but the test events (whose
// actions act outside it). The master gives those writes request ids
// (master.RequestIDs(StateWrite)), applied once however often they are
// sent.
func StateWrite(r *http.Request) bool {
	return !strings.HasPrefix(r.URL.Path, "/api/v2_beta/event/")
}

// Verifier authenticates Authorization headers. *auth.Verifier implements it.
type Verifier interface {
	Verify(header string) (*auth.Claims, error)
}

var _ Verifier = (*auth.Verifier)(nil)

// ActionRunner executes the actions of test events sent with process_type
// Full. *action.Registry and *action.Reloader implement it.
type ActionRunner interface {
	Run(ctx context.Context, a tree.Action) error
}

// Config holds the API's limits.
type Config struct {
	// MaxBody bounds JSON request bodies (default 1 MiB).
	MaxBody int64
	// MaxImport bounds import uploads (default 10 MiB).
	MaxImport int64
	// Hostname names export files (default "squall").
	Hostname string
}

// Default returns the default limits.
func Default() Config {
	return Config{MaxBody: 1 << 20, MaxImport: 10 << 20, Hostname: "squall"}
}

// API serves the v2_beta configuration and test-event API.
type API struct {
	cfg     Config
	store   Store
	tokens  Verifier
	actions ActionRunner
	logger  *slog.Logger
	// clientErrs logs 4xx answers at debug level, with a summary at info.
	clientErrs *httpguard.ClientErrors

	// edits serializes read-modify-write of the draft on this node: every
	// request is served by the leader, so concurrent edits apply one after
	// the other and none is lost.
	edits sync.Mutex

	// compiled caches the compiled active tree per authorization root.
	compiledMu sync.Mutex
	compiled   map[string]*tree.Tree
	compiledAt uint64
}

// New returns the API. actions may be nil: then Full test events are
// refused. logger may be nil.
func New(cfg Config, st Store, tokens Verifier, actions ActionRunner, logger *slog.Logger) *API {
	d := Default()
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = d.MaxBody
	}
	if cfg.MaxImport <= 0 {
		cfg.MaxImport = d.MaxImport
	}
	if cfg.Hostname == "" {
		cfg.Hostname = d.Hostname
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "api")
	return &API{cfg: cfg, store: st, tokens: tokens, actions: actions, logger: logger,
		clientErrs: httpguard.NewClientErrors(logger, 0), compiled: map[string]*tree.Tree{}}
}

// Prefix is the path prefix of every route of the API.
const Prefix = "/api/v2_beta/"

// Handler returns the API's routes, rooted at /api/v2_beta/.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	// Every route names the permission it needs at least: wrap checks it
	// from the headers and the URL before the handler reads a byte of
	// the body. Handlers may ask for more (Full test events) once they
	// know what the body asks for.
	h := func(pattern string, perm auth.Permission, fn handlerFunc) { mux.Handle(pattern, a.wrap(perm, fn)) }
	const c = "/api/v2_beta/config"
	h("GET "+c+"/active/tree/info/{param_auth}", auth.View, a.activeInfo)
	h("GET "+c+"/active/tree/children/{param_auth}", auth.View, a.activeChildren)
	h("GET "+c+"/active/tree/children/{param_auth}/{node_path}", auth.View, a.activeChildren)
	h("GET "+c+"/active/tree/details/{param_auth}/{node_path}", auth.View, a.activeDetails)
	h("GET "+c+"/active/rule/details/{param_auth}/{ruleset_path}/{rule_name}", auth.View, a.activeRule)
	// The active tree's export, in the draft export's file format: an
	// extension, so that exporting needs no draft (which would replace
	// the current one).
	h("GET "+c+"/active/tree/export/{param_auth}/{node_path}", auth.View, a.export)

	h("GET "+c+"/drafts/{param_auth}", auth.View, a.listDrafts)
	h("POST "+c+"/drafts/{param_auth}", auth.Edit, a.createDraft)
	h("DELETE "+c+"/drafts/{param_auth}/{draft_id}", auth.Edit, a.deleteDraft)
	h("POST "+c+"/drafts/{param_auth}/{draft_id}/deploy", auth.Edit, a.deployDraft)
	h("POST "+c+"/drafts/{param_auth}/{draft_id}/takeover", auth.Edit, a.takeOver)

	h("GET "+c+"/draft/tree/children/{param_auth}/{draft_id}", auth.View, a.draftChildren)
	h("GET "+c+"/draft/tree/children/{param_auth}/{draft_id}/{node_path}", auth.View, a.draftChildren)
	h("GET "+c+"/draft/tree/details/{param_auth}/{draft_id}/{node_path}", auth.View, a.draftDetails)
	h("POST "+c+"/draft/tree/details/{param_auth}/{draft_id}/{node_path}", auth.Edit, a.createNode)
	h("PUT "+c+"/draft/tree/details/{param_auth}/{draft_id}/{node_path}", auth.Edit, a.editNode)
	h("DELETE "+c+"/draft/tree/details/{param_auth}/{draft_id}/{node_path}", auth.Edit, a.deleteNode)
	h("POST "+c+"/draft/tree/import/{param_auth}/{draft_id}/{node_path}", auth.Edit, a.importChild)
	h("PUT "+c+"/draft/tree/import/{param_auth}/{draft_id}/{node_path}", auth.Edit, a.importReplace)
	h("GET "+c+"/draft/tree/export/{param_auth}/{draft_id}/{node_path}", auth.View, a.export)
	h("PUT "+c+"/draft/tree/export/{param_auth}/{draft_id}/{node_path}", auth.View, a.export)

	h("GET "+c+"/draft/rule/details/{param_auth}/{draft_id}/{ruleset_path}/{rule_name}", auth.View, a.draftRule)
	h("POST "+c+"/draft/rule/details/{param_auth}/{draft_id}/{ruleset_path}", auth.Edit, a.createRule)
	h("PUT "+c+"/draft/rule/details/{param_auth}/{draft_id}/{ruleset_path}/{rule_name}", auth.Edit, a.editRule)
	h("DELETE "+c+"/draft/rule/details/{param_auth}/{draft_id}/{ruleset_path}/{rule_name}", auth.Edit, a.deleteRule)
	h("PUT "+c+"/draft/rule/move/{param_auth}/{draft_id}/{ruleset_path}/{rule_name}", auth.Edit, a.moveRule)

	h("POST /api/v2_beta/event/active/{param_auth}", auth.View, a.eventActive)
	h("POST /api/v2_beta/event/draft/{param_auth}/{draft_id}", auth.View, a.eventDraft)
	// Tornado's spelling (docs/decisions.md decision 4).
	h("POST /api/v2_beta/event/drafts/{param_auth}/{draft_id}", auth.View, a.eventDraft)

	return a.withNoRoute(mux)
}

// withNoRoute serves mux's routes and answers any other request in JSON:
// 404, or 405 with the mux's Allow header (apierror.NoRoute).
func (a *API) withNoRoute(mux *http.ServeMux) http.Handler {
	return apierror.WithNoRoute(mux, func(w http.ResponseWriter, r *http.Request, e *Error) { a.writeError(w, r, e) })
}

// handlerFunc is a handler that returns its result, written as JSON by wrap.
type handlerFunc func(w http.ResponseWriter, r *http.Request) (any, error)

// Error is an error answer: {"code", "params", "message"} with a status
// (docs/decisions.md decision 16).
type Error = apierror.Error

func errorf(status int, code, format string, args ...any) *Error {
	return apierror.Errorf(status, code, format, args...)
}

// wrap turns a handlerFunc into an http.Handler: it authenticates the
// request and checks that it grants perm, from the headers and the URL
// alone, then runs fn. Results are written as JSON with 200 (nil as null,
// decision 9), errors as their JSON answer.
//
// A request refused here costs no byte of its body: the answer closes the
// connection instead of reading the body to reuse it.
func (a *API) wrap(perm auth.Permission, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, err := a.tokens.Verify(r.Header.Get("Authorization"))
		if err == nil {
			r = r.WithContext(withOrigin(context.WithValue(r.Context(), claimsKey{}, claims), claims.User, r.PathValue("param_auth")))
			_, err = a.scope(r, perm)
		}
		if err != nil {
			if r.Body != nil && r.Body != http.NoBody {
				w.Header().Set("Connection", "close")
			}
			a.writeError(w, r, err)
			return
		}
		res, err := fn(w, r)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if raw, ok := res.(rawResponse); ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(raw)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

// withOrigin adds the request's user and authorization to the origin ctx
// carries (its request id, when it has one), which the store records in
// the audit log with each change (docs/decisions.md decision 61).
func withOrigin(ctx context.Context, user, authorization string) context.Context {
	o := store.OriginFromContext(ctx)
	o.User, o.Authorization = user, authorization
	return store.ContextWithOrigin(ctx, o)
}

// rawResponse is a response body already encoded.
type rawResponse []byte

func writeJSON(w http.ResponseWriter, status int, v any) { apierror.WriteJSON(w, status, v) }

// writeError answers err and logs it once: client errors through the
// summing recorder, server errors at error level, a 500's details under
// the request id its answer names.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	if e.Status < 500 {
		a.clientErrs.Record(r.Context(), e.Status, e.Code, "request failed", "method", r.Method, "path", r.URL.Path, "error", e.Message)
		apierror.Write(w, e)
		return
	}
	pub, id := e.Public()
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "error", e.Message}
	if id != "" {
		attrs = append(attrs, "request_id", id)
	}
	a.logger.Log(r.Context(), slog.LevelError, "request failed", attrs...)
	apierror.Write(w, pub)
}

// toError maps the errors of the layers below to answers.
func toError(err error) *Error {
	var notOwner *store.NotOwnerError
	var outOfScope *store.OutOfScopeError
	if e := apierror.Common(err); e != nil {
		return e
	}
	if e := versionError(err); e != nil {
		return e
	}
	if e := testsError(err); e != nil {
		return e
	}
	switch {
	case errors.As(err, &notOwner):
		return &Error{Status: http.StatusForbidden, Code: "NOT_OWNER", Params: map[string]string{"OWNER": notOwner.Owner, "ID": notOwner.DraftID}, Message: err.Error()}
	case errors.As(err, &outOfScope):
		return &Error{Status: http.StatusForbidden, Code: "DEPLOY_OUT_OF_SCOPE",
			Params:  map[string]string{"SCOPE": config.PathString(outOfScope.Scope), "PATHS": strings.Join(outOfScope.Paths, ",")},
			Message: fmt.Sprintf("a token scoped to %s deploys only changes below it; the draft also differs from the active tree at %s: deploy with an authorization at the root or with admin, or undo those changes", config.PathString(outOfScope.Scope), strings.Join(outOfScope.Paths, ", "))}
	case errors.Is(err, store.ErrNoDraft):
		return &Error{Status: http.StatusNotFound, Code: "DRAFT_NOT_FOUND", Message: err.Error()}
	case errors.Is(err, config.ErrNoNode):
		return &Error{Status: http.StatusNotFound, Code: "NODE_NOT_FOUND", Message: err.Error()}
	case errors.Is(err, config.ErrNoRule):
		return &Error{Status: http.StatusNotFound, Code: "RULE_NOT_FOUND", Message: err.Error()}
	case errors.Is(err, config.ErrNotRuleset), errors.Is(err, config.ErrNoChildren), errors.Is(err, config.ErrWrongKind),
		errors.Is(err, config.ErrRootNode), errors.Is(err, config.ErrPosition), errors.Is(err, config.ErrInvalidEdit):
		// The handlers check these first; they come from the store only
		// when the draft changed in between.
		return &Error{Status: http.StatusBadRequest, Code: "BAD_EDIT", Message: err.Error()}
	case errors.Is(err, store.ErrInvalidTree), errors.Is(err, config.ErrNestedIterator), isValidation(err), errors.Is(err, config.ErrLimit):
		return validationError(err)
	}
	return apierror.Internal(err)
}

func isValidation(err error) bool {
	var ve *config.ValidationError
	return errors.As(err, &ve)
}

// validationError answers a tree that would be invalid: 409, with
// NESTED_ITERATOR_ERROR for nested iterators, the NODE_NAME of a
// duplicate name, and LIMIT_EXCEEDED with the LIMIT, its MAX and the
// VALUE for a tree over a limit.
func validationError(err error) *Error {
	var le *config.LimitError
	if errors.As(err, &le) {
		return &Error{Status: http.StatusConflict, Code: "LIMIT_EXCEEDED",
			Params:  map[string]string{"LIMIT": le.Limit, "MAX": strconv.Itoa(le.Max), "VALUE": strconv.Itoa(le.Value)},
			Message: truncate(err.Error(), 1024) + " (docs/rules.md lists the limits)"}
	}
	e := &Error{Status: http.StatusConflict, Code: "VALIDATION_ERROR", Params: map[string]string{}, Message: err.Error()}
	if errors.Is(err, config.ErrNestedIterator) {
		e.Code = "NESTED_ITERATOR_ERROR"
	}
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		return e
	}
	if errors.Is(err, config.ErrDuplicateName) {
		if ve.Rule != "" {
			e.Params["RULE_NAME"] = ve.Rule
		} else if len(ve.Path) > 0 {
			e.Params["NODE_NAME"] = ve.Path[len(ve.Path)-1]
		}
	}
	if f := fieldOf(ve); f != "" {
		e.Params["FIELD"] = f
	}
	return e
}

// ruleField is the prefix of a rule's fields in a ValidationError of its
// ruleset: "rules[2].".
var ruleField = regexp.MustCompile(`^rules\[\d+\]\.`)

// fieldOf is the FIELD param of a validation error: the path of the field
// inside the body of the node or rule it is about (a rule's, such as
// "constraint.WHERE.operators[1].first", without the ruleset's
// "rules[N]." prefix), "" when the error names none.
func fieldOf(ve *config.ValidationError) string {
	if ve.Rule != "" {
		return ruleField.ReplaceAllString(ve.Field, "")
	}
	return ve.Field
}

// readJSON reads a JSON body of at most MaxBody bytes into a byte slice,
// checking its content type and, before any decoder sees it, its nesting
// depth (checkJSON).
func (a *API) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if !isJSONType(ct) {
		return nil, errorf(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "the body must be sent with Content-Type: application/json (got %q)", ct)
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBody)
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	return b, checkJSON(b)
}

// checkJSON refuses, with a 400, a body nested deeper than
// jsonlimit.DefaultMaxDepth.
func checkJSON(b []byte) error {
	if err := jsonlimit.Check(b, jsonlimit.Limits{}); err != nil {
		return badRequest(err)
	}
	return nil
}

// isJSONType reports whether a Content-Type header names JSON.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || isJSONSuffix(mt))
}

func isJSONSuffix(mt string) bool {
	return len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// badRequest answers 400 BAD_REQUEST; a body that does not decode has
// the path of the field at fault in params.FIELD.
func badRequest(err error) *Error {
	e := &Error{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Message: err.Error()}
	var de *config.DecodeError
	if errors.As(err, &de) && de.Field != "" {
		e.Params = map[string]string{"FIELD": de.Field}
	}
	return e
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
