package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// scope authenticates the request and picks its authorization (param_auth),
// checking that it grants one of the permissions.
// The claims are those wrap verified, when it did.
func (a *API) scope(r *http.Request, perms ...auth.Permission) (*auth.Scope, error) {
	claims, ok := r.Context().Value(claimsKey{}).(*auth.Claims)
	if !ok {
		var err error
		if claims, err = a.tokens.Verify(r.Header.Get("Authorization")); err != nil {
			return nil, err
		}
	}
	name := r.PathValue("param_auth")
	var firstErr error
	for _, p := range perms {
		s, err := claims.Scope(name, p)
		if err == nil {
			return s, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if errors.Is(firstErr, auth.ErrForbidden) {
		return nil, &Error{Status: http.StatusForbidden, Code: "MISSING_REQUIRED_PERMISSIONS", Message: firstErr.Error()}
	}
	return nil, firstErr
}

// claimsKey is the context key of the claims wrap verified.
type claimsKey struct{}

// resolve turns the URL path value into an absolute node path.
func resolve(s *auth.Scope, nodePath string) ([]string, error) {
	p, err := s.Resolve(nodePath)
	if err != nil {
		return nil, &Error{Status: http.StatusForbidden, Code: "FORBIDDEN_PATH", Params: map[string]string{"PATH": nodePath}, Message: err.Error()}
	}
	return p, nil
}

// editScope returns the node below which the scope's holder may change
// the tree (docs/decisions.md decision 19): nil for admins and authorizations at
// the root, who change anything, else the authorization's path.
func editScope(s *auth.Scope) []string {
	if s.Grants(auth.Admin) || len(s.Path) <= 1 {
		return nil
	}
	return s.Base()
}

// writable checks that the node at path (absolute, inside the scope) may
// become next (nil: be deleted). The scope's own node keeps its name, type,
// filter, target and active flag for a scoped editor, because they isolate
// its tenant (docs/decisions.md decision 19); its description, children and rules
// may change. cur is the node now at path.
func writable(s *auth.Scope, path []string, cur, next *config.Node) error {
	scope := editScope(s)
	if scope == nil || len(path) > len(scope) {
		return nil
	}
	if cur != nil && next != nil && config.SameIsolation(cur, next) {
		return nil
	}
	p := config.PathString(path)
	return &Error{Status: http.StatusForbidden, Code: "SCOPE_NODE_READ_ONLY", Params: map[string]string{"PATH": p},
		Message: fmt.Sprintf("%s is the node of authorization %q: a token scoped there changes what lies below it, not the node's name, type, filter, target or active flag, and does not delete it", p, s.Name)}
}

// find returns the node at an absolute path (starting with root), or a 404.
func find(root *config.Node, path []string) (*config.Node, error) {
	if len(path) == 0 || path[0] != root.Name {
		return nil, nodeNotFound(path)
	}
	n := root.Find(path[1:])
	if n == nil {
		return nil, nodeNotFound(path)
	}
	return n, nil
}

// resolveNode returns the node at the URL path value nodePath within s's
// scope, and its absolute path (see resolve and find).
func resolveNode(root *config.Node, s *auth.Scope, nodePath string) (*config.Node, []string, error) {
	path, err := resolve(s, nodePath)
	if err != nil {
		return nil, nil, err
	}
	n, err := find(root, path)
	if err != nil {
		return nil, nil, err
	}
	return n, path, nil
}

func nodeNotFound(path []string) *Error {
	p := config.PathString(path)
	return &Error{Status: http.StatusNotFound, Code: "NODE_NOT_FOUND", Params: map[string]string{"PATH": p}, Message: "no node at " + p}
}

// hasIteratorAncestor reports whether an iterator is among the nodes on
// the path above its last node.
func hasIteratorAncestor(root *config.Node, path []string) bool {
	cur := root
	for i := 1; i < len(path); i++ {
		if cur.Kind == config.KindIterator {
			return true
		}
		if cur = cur.Child(path[i]); cur == nil {
			return false
		}
	}
	return false
}

// ownedDraft returns the draft if its id is id and the caller owns it.
func (a *API) ownedDraft(s *auth.Scope, id string) (*store.Draft, error) {
	d, err := a.draft(id)
	if err != nil {
		return nil, err
	}
	if err := owned(s, d, id); err != nil {
		return nil, err
	}
	return d, nil
}

// owned checks that d's id is id and the caller owns it.
func owned(s *auth.Scope, d *store.Draft, id string) error {
	if d.ID != id {
		return draftNotFound(id)
	}
	if d.Owner != s.User {
		return &store.NotOwnerError{DraftID: d.ID, Owner: d.Owner}
	}
	return nil
}

func draftNotFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "DRAFT_NOT_FOUND", Params: map[string]string{"ID": id}, Message: "no draft " + id}
}

// readableDraft returns the draft if its id is id and the caller may read
// it: anyone with view, but for a user a takeover of this draft displaced
// (decision 8, the spec's state table: after a takeover, any draft request
// by the previous owner is rejected), until they take it over again.
func (a *API) readableDraft(s *auth.Scope, id string) (*store.Draft, error) {
	d, err := a.draft(id)
	if err != nil {
		return nil, err
	}
	if s.User != d.Owner && slices.Contains(d.Displaced, s.User) {
		return nil, &store.NotOwnerError{DraftID: d.ID, Owner: d.Owner, Displaced: true}
	}
	return d, nil
}

// draft returns the draft if its id is id. Its tree is the store's own,
// shared: the handlers read it and never modify it.
func (a *API) draft(id string) (*store.Draft, error) {
	d, err := a.store.DraftView()
	if err != nil {
		return nil, err
	}
	if d.ID != id {
		return nil, draftNotFound(id)
	}
	return d, nil
}

func readAll(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		if apierror.IsBodyCut(err) {
			return nil, err
		}
		return nil, badRequest(err)
	}
	return b, nil
}

// childAt returns the parent of the node at path and the node's index
// among the parent's children: a 400 for the root, which has no parent,
// and a 404 when there is no such node.
func childAt(root *config.Node, path []string) (*config.Node, int, error) {
	if len(path) < 2 {
		return nil, 0, &Error{Status: http.StatusBadRequest, Code: "ROOT_NODE", Message: "the root node cannot be changed this way"}
	}
	parent, err := find(root, path[:len(path)-1])
	if err != nil {
		return nil, 0, nodeNotFound(path)
	}
	name := path[len(path)-1]
	i := slices.IndexFunc(parent.Children, func(c *config.Node) bool { return c.Name == name })
	if i < 0 {
		return nil, 0, nodeNotFound(path)
	}
	return parent, i, nil
}
