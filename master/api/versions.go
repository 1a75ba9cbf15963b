package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// VersionsPath is the root of the versions API (docs/api.md, "Versions"):
//
//	GET  /squall/v1/tree/versions                    list, newest first (view)
//	GET  /squall/v1/tree/versions/{n}                version n's tree, export form; n may be "active" (view)
//	GET  /squall/v1/tree/versions/{a}/diff/{b}       node-by-node diff; a or b may be "active" (view)
//	GET  /squall/v1/tree/versions/{n}/tests          the rule tests version n was deployed with; n may be "active" (view)
//	POST /squall/v1/tree/versions/{n}/rollback       deploy version n's tree as a new version (edit)
//
// Each takes the authorization to act under in the auth query parameter
// (optional when the token has one): a token scoped below the root reads
// and rolls back the subtree at its node only.
const VersionsPath = "/squall/v1/tree/versions"

// Versions is what the versions API needs of the store.
// *store.Store implements it.
type Versions interface {
	Active() (*config.Node, uint64)
	Versions() []store.Version
	VersionTree(n uint64) (store.Version, *config.Node, error)
	RollbackTo(ctx context.Context, sess *store.Session, c store.Rollback) (store.Result, error)
	VersionTests(n uint64) ([]store.TestFile, error)
	ActiveTests() []store.TestFile
}

var _ Versions = (*store.Store)(nil)

// The paging bounds of the versions list.
const (
	defaultVersionsLimit = 50
	maxVersionsLimit     = 1000
)

// VersionList is the answer of GET /squall/v1/tree/versions: a page of
// versions, newest first, and the before parameter of the next page (0:
// none).
type VersionList struct {
	Versions   []store.Version `json:"versions"`
	NextBefore uint64          `json:"next_before,omitempty"`
}

// VersionDiff is the answer of GET /squall/v1/tree/versions/{a}/diff/{b}:
// the changes from a to b (nil: none). From and To are nil for the
// active tree.
type VersionDiff struct {
	From    *store.Version  `json:"from"`
	To      *store.Version  `json:"to"`
	Changes []config.Change `json:"changes"`
}

// RollbackResult is the answer of a rollback: the version it made. A
// request sent again after its first attempt applied (same request id) is
// Replayed: it changed nothing more, and Version holds only RollbackOf.
type RollbackResult struct {
	Version  store.Version `json:"version"`
	Replayed bool          `json:"replayed,omitempty"`
}

// VersionsHandler returns the versions API's routes, to mount at
// VersionsPath and VersionsPath+"/" on the leader with request ids.
func (a *API) VersionsHandler(vs Versions) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, perm auth.Permission, fn handlerFunc) {
		mux.Handle(pattern, a.wrapQueryAuth(perm, fn))
	}
	h("GET "+VersionsPath, auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) { return listVersions(vs, r) })
	h("GET "+VersionsPath+"/{n}", auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) { return a.showVersion(vs, w, r) })
	h("GET "+VersionsPath+"/{a}/diff/{b}", auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) { return a.diffVersions(vs, r) })
	h("GET "+VersionsPath+"/{n}/tests", auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) { return a.versionTests(vs, r) })
	h("POST "+VersionsPath+"/{n}/rollback", auth.Edit, func(w http.ResponseWriter, r *http.Request) (any, error) { return a.rollback(vs, r) })
	return a.withNoRoute(mux)
}

// wrapQueryAuth is wrap for routes that name their authorization in the
// auth query parameter instead of the path: with none, the token's only
// authorization.
func (a *API) wrapQueryAuth(perm auth.Permission, fn handlerFunc) http.Handler {
	inner := a.wrap(perm, fn)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("auth")
		if name == "" {
			if c, err := a.tokens.Verify(r.Header.Get("Authorization")); err == nil && len(c.Auths) == 1 {
				for n := range c.Auths {
					name = n
				}
			} else if err == nil {
				a.writeError(w, r, errorf(http.StatusBadRequest, "AUTH_REQUIRED", "the token has %d authorizations: name one with the auth query parameter", len(c.Auths)))
				return
			}
		}
		r.SetPathValue("param_auth", name)
		inner.ServeHTTP(w, r)
	})
}

func listVersions(vs Versions, r *http.Request) (any, error) {
	q := r.URL.Query()
	limit, err := pageLimit(q, defaultVersionsLimit, maxVersionsLimit)
	if err != nil {
		return nil, err
	}
	var before uint64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "before %q is not a version number", v)
		}
		before = n
	}
	all := vs.Versions()
	out := VersionList{Versions: []store.Version{}}
	for i, v := range all {
		if before != 0 && v.Number >= before {
			continue
		}
		if len(out.Versions) == limit {
			out.NextBefore = out.Versions[limit-1].Number
			break
		}
		out.Versions = append(out.Versions, all[i])
	}
	return out, nil
}

// pageLimit reads the limit query parameter of a paged list: def when
// absent, else an integer from 1 to maxLimit.
func pageLimit(q url.Values, def, maxLimit int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, errorf(http.StatusBadRequest, "BAD_REQUEST", "limit %q is not an integer between 1 and %d", v, maxLimit)
	}
	return n, nil
}

// versionNumber reads a version number path value.
func versionNumber(r *http.Request, name string) (uint64, error) {
	v := r.PathValue(name)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, errorf(http.StatusBadRequest, "BAD_REQUEST", "%q is not a version number (1, 2, ...)", v)
	}
	return n, nil
}

// scopedTree returns the node of tree the caller's authorization sees:
// the whole tree, or the subtree at a scoped authorization's node.
func scopedTree(s *auth.Scope, tree *config.Node) (*config.Node, error) {
	return find(tree, s.Base())
}

func (a *API) showVersion(vs Versions, w http.ResponseWriter, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.View)
	if err != nil {
		return nil, err
	}
	v, tree, err := treeAt(vs, r, "n")
	if err != nil {
		return nil, err
	}
	node, err := scopedTree(s, tree)
	if err != nil {
		return nil, err
	}
	b, err := config.EncodeExport(node)
	if err != nil {
		return nil, err
	}
	name := "active"
	if v != nil {
		name = fmt.Sprintf("version-%d", v.Number)
		// The hash of the whole tree the version holds.
		w.Header().Set("X-Squall-Version-Hash", v.Hash)
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("%s-%s.json", a.cfg.Hostname, name)))
	return rawResponse(b), nil
}

// treeAt returns the tree the path value name designates: a version or
// "active" (nil version).
func treeAt(vs Versions, r *http.Request, name string) (*store.Version, *config.Node, error) {
	if r.PathValue(name) == "active" {
		tree, _ := vs.Active()
		return nil, tree, nil
	}
	n, err := versionNumber(r, name)
	if err != nil {
		return nil, nil, err
	}
	v, tree, err := vs.VersionTree(n)
	if err != nil {
		return nil, nil, err
	}
	return &v, tree, nil
}

func (a *API) diffVersions(vs Versions, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.View)
	if err != nil {
		return nil, err
	}
	from, ta, err := treeAt(vs, r, "a")
	if err != nil {
		return nil, err
	}
	to, tb, err := treeAt(vs, r, "b")
	if err != nil {
		return nil, err
	}
	// A scoped caller compares the subtrees at its node: a side without
	// that node compares as absent.
	na, _ := scopedTree(s, ta)
	nb, _ := scopedTree(s, tb)
	var changes []config.Change
	if na != nil || nb != nil {
		changes = config.Diff(na, nb)
	}
	if changes == nil {
		changes = []config.Change{}
	}
	return VersionDiff{From: from, To: to, Changes: changes}, nil
}

// rollback deploys a version's tree as a new version: the permission of
// a deploy, and a token scoped below the root rolls back the subtree at
// its node only (decision 19). Refused while a draft exists unless
// force=true; message= is recorded with the new version.
func (a *API) rollback(vs Versions, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.Edit)
	if err != nil {
		return nil, err
	}
	n, err := versionNumber(r, "n")
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	force := false
	if v := q.Get("force"); v != "" {
		if force, err = strconv.ParseBool(v); err != nil {
			return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "force %q is not true or false", v)
		}
	}
	message := q.Get("message")
	if err := store.CheckVersionMessage(message); err != nil {
		return nil, badRequest(err)
	}
	_, tree, err := vs.VersionTree(n)
	if err != nil {
		return nil, err
	}
	if err := a.compiles(tree); err != nil {
		return nil, err
	}
	sess := store.SessionFromContext(r.Context())
	res, err := vs.RollbackTo(r.Context(), sess, store.Rollback{Version: n, User: s.User, Scope: editScope(s), Force: force, Message: message})
	if err != nil {
		return nil, err
	}
	var oos *store.OutOfScopeError
	if errors.As(res.Err, &oos) {
		return nil, &Error{Status: http.StatusForbidden, Code: "ROLLBACK_OUT_OF_SCOPE", Params: map[string]string{"SCOPE": config.PathString(oos.Scope)},
			Message: fmt.Sprintf("a token scoped to %s rolls back what lies below it; version %d's node %s differs in its name, type, filter, target or active flag: roll back with an authorization at the root; nothing was changed", config.PathString(oos.Scope), n, config.PathString(oos.Scope))}
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if !res.Replayed {
		for _, v := range vs.Versions() {
			if v.Index == res.Index {
				return RollbackResult{Version: v}, nil
			}
		}
	}
	// A resent request whose first attempt applied (the state's index is
	// not the rollback's then), or a version pruned since.
	return RollbackResult{Version: store.Version{RollbackOf: n}, Replayed: res.Replayed}, nil
}

// versionError maps the versions' store errors to answers, or nil.
func versionError(err error) *Error {
	var de *store.DraftExistsError
	switch {
	case errors.As(err, &de):
		return &Error{Status: http.StatusConflict, Code: "DRAFT_EXISTS", Params: map[string]string{"ID": de.DraftID, "OWNER": de.Owner},
			Message: fmt.Sprintf("draft %s of %s exists: deploy or delete it first, or roll back with force=true (the draft is kept); nothing was changed", de.DraftID, de.Owner)}
	case errors.Is(err, store.ErrNoVersion):
		return &Error{Status: http.StatusNotFound, Code: "VERSION_NOT_FOUND", Message: err.Error() + " (GET " + VersionsPath + " lists the versions kept)"}
	case errors.Is(err, store.ErrNoVersionNode):
		return &Error{Status: http.StatusNotFound, Code: "NODE_NOT_FOUND", Message: err.Error() + "; nothing was changed"}
	case errors.Is(err, store.ErrLevel):
		return &Error{Status: http.StatusConflict, Code: "FEATURE_LEVEL", Message: err.Error()}
	case errors.Is(err, store.ErrInvalidCommand):
		return &Error{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Message: err.Error()}
	}
	return nil
}

// VersionTestsView is the answer of GET VersionsPath/{n}/tests: the rule
// tests version n (or the active tree) was deployed with.
type VersionTestsView struct {
	// Version is 0 for the active tree.
	Version uint64         `json:"version,omitempty"`
	Tested  string         `json:"tests_hash,omitempty"`
	Cases   int            `json:"cases"`
	Files   []TestFileView `json:"files"`
}

func (a *API) versionTests(vs Versions, r *http.Request) (any, error) {
	if _, err := a.scope(r, auth.View); err != nil {
		return nil, err
	}
	var n uint64
	var files []store.TestFile
	if r.PathValue("n") == "active" {
		files = vs.ActiveTests()
	} else {
		var err error
		if n, err = versionNumber(r, "n"); err != nil {
			return nil, err
		}
		if files, err = vs.VersionTests(n); err != nil {
			return nil, err
		}
	}
	v, err := testsView(&store.Draft{Tests: files})
	if err != nil {
		return nil, err
	}
	return VersionTestsView{Version: n, Tested: v.Tested, Cases: v.Cases, Files: v.Files}, nil
}
