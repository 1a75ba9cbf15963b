package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/panics"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

func (a *API) listDrafts(_ http.ResponseWriter, r *http.Request) (any, error) {
	if _, err := a.scope(r, auth.View); err != nil {
		return nil, err
	}
	d, err := a.store.DraftView()
	if errors.Is(err, store.ErrNoDraft) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return []string{d.ID}, nil
}

// DraftID is the answer to draft creation.
type DraftID struct {
	ID string `json:"id"`
}

func (a *API) createDraft(_ http.ResponseWriter, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.Edit)
	if err != nil {
		return nil, err
	}
	a.edits.Lock()
	defer a.edits.Unlock()
	id, err := a.store.NewDraftID()
	if err != nil {
		return nil, err
	}
	sess := store.SessionFromContext(r.Context())
	setAnswer(sess, DraftID{ID: id})
	if err := a.store.CreateDraftID(r.Context(), sess, id, s.User); err != nil {
		return nil, err
	}
	return DraftID{ID: id}, nil
}

func (a *API) deleteDraft(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.draftOp(r, func(ctx context.Context, s *auth.Scope, d *store.Draft) (any, error) {
		sess := store.SessionFromContext(ctx)
		setAnswer(sess, nil)
		return nil, a.store.DeleteDraft(ctx, sess, d.ID, s.User)
	})
}

func (a *API) takeOver(_ http.ResponseWriter, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.Edit)
	if err != nil {
		return nil, err
	}
	a.edits.Lock()
	defer a.edits.Unlock()
	id := r.PathValue("draft_id")
	if _, err := a.draft(id); err != nil {
		return nil, err
	}
	sess := store.SessionFromContext(r.Context())
	setAnswer(sess, nil)
	return nil, a.store.TakeOver(r.Context(), sess, id, s.User)
}

// deployDraft deploys the caller's draft. A token scoped below the root
// (without admin) deploys only a draft that differs from the active tree
// below its node (docs/decisions.md decision 19); the store checks it when the
// deploy is applied. The draft's rule tests run first: a failure is 422
// TESTS_FAILED and nothing is deployed; the deploy names the draft that
// was tested, which the store compares with the draft when the deploy is
// applied (decision 62).
func (a *API) deployDraft(w http.ResponseWriter, r *http.Request) (any, error) {
	// message= is recorded with the version the deploy makes.
	message := r.URL.Query().Get("message")
	if err := store.CheckVersionMessage(message); err != nil {
		return nil, badRequest(err)
	}
	return a.draftOp(r, func(ctx context.Context, s *auth.Scope, d *store.Draft) (any, error) {
		// The tree deployed is d's: draft changes are serialized by
		// a.edits, and d was read after the consistent read.
		// Running the tests compiles the tree (and answers 422 when it
		// does not compile); without tests, compile it here.
		if len(d.Tests) == 0 {
			if err := a.compiles(d.Tree); err != nil {
				return nil, err
			}
		}
		run, err := a.runTests(d)
		if err != nil {
			return nil, err
		}
		if !run.Passed {
			return nil, testsFailed(run)
		}
		sess := store.SessionFromContext(ctx)
		setAnswer(sess, nil)
		if _, err := a.store.DeployTested(ctx, sess, d.ID, s.User, editScope(s), message, run.Tested); err != nil {
			return nil, err
		}
		a.warn(w, r, s.User, action.UnsupportedInTree(d.Tree, nil))
		return nil, nil
	})
}

// compiles checks that the engines' compiler takes a tree (or, for an
// import, a subtree) before it is deployed or imported: a tree that
// validates but does not compile, which only a bug of the compiler makes,
// is refused with 422 TREE_DOES_NOT_COMPILE naming the node, and nothing
// changes (decision 51).
func (a *API) compiles(n *config.Node) error {
	_, err := tree.Compile(n)
	if pe, ok := errors.AsType[*panics.Error](err); ok {
		a.logger.Error("the compiler panicked on a tree that validates", "error", err.Error(), "stack", string(pe.Stack))
	}
	return compileError(err)
}

// compileError is the answer to an error of tree.Compile: nil but for a
// *tree.CompileError. A tree that does not validate is the store's to
// refuse, with the path of the node in the whole tree.
func compileError(err error) error {
	ce, ok := errors.AsType[*tree.CompileError](err)
	if !ok {
		return nil
	}
	node := config.PathString(ce.Path)
	msg := fmt.Sprintf("the tree validates but the engines' compiler refuses node %s: %v; nothing was changed", node, ce.Err)
	if _, ok := errors.AsType[*panics.Error](err); ok {
		// The panic's text is the compiler's internals; the log has it.
		msg = fmt.Sprintf("the tree validates but the engines' compiler fails on node %s (a bug of Squall: report it with this tree); nothing was changed", node)
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "TREE_DOES_NOT_COMPILE", Params: map[string]string{"NODE": node}, Message: msg}
}

// HeaderWarnings carries the warnings of a draft edit, import or deploy,
// whose answer is null (decision 9): the actions of what it wrote that no
// executor handles (engines may enable executors this master lacks, so it
// is a warning, not an error). Its value is a JSON array of at most
// maxHeaderWarnings strings (ASCII: action ids and node names are); the
// log has them all.
const HeaderWarnings = "X-Squall-Warnings"

// maxHeaderWarnings bounds the warnings sent in HeaderWarnings.
const maxHeaderWarnings = 20

// warn logs bad, the unsupported actions a change by user wrote, and
// sends them in HeaderWarnings; it does nothing when bad is empty.
func (a *API) warn(w http.ResponseWriter, r *http.Request, user string, bad []action.Unsupported) {
	if len(bad) == 0 {
		return
	}
	all := make([]string, len(bad))
	for i, u := range bad {
		all[i] = u.String()
	}
	a.logger.Warn("a draft change writes actions no executor handles", "method", r.Method, "path", r.URL.Path, "user", user, "warnings", all)
	shown := all
	if len(shown) > maxHeaderWarnings {
		shown = append(shown[:maxHeaderWarnings:maxHeaderWarnings], fmt.Sprintf("and %d more (the master's log lists them all)", len(all)-maxHeaderWarnings))
	}
	b, _ := json.Marshal(shown) // a []string always encodes
	w.Header().Set(HeaderWarnings, string(b))
}

// unsupportedIn lists the actions an edit writes that no executor handles.
func unsupportedIn(e *config.Edit) []action.Unsupported {
	switch e.Op {
	case config.EditAddNode:
		return action.UnsupportedInTree(e.Node, e.Path)
	case config.EditReplaceNode:
		return action.UnsupportedInTree(e.Node, e.Path[:len(e.Path)-1])
	case config.EditAddRule, config.EditUpdateRule:
		return action.UnsupportedInRule(e.Rule, e.Path)
	}
	return nil
}

// draftOp runs a store operation on the caller's draft and returns its
// answer.
func (a *API) draftOp(r *http.Request, op func(ctx context.Context, s *auth.Scope, d *store.Draft) (any, error)) (any, error) {
	s, err := a.scope(r, auth.Edit)
	if err != nil {
		return nil, err
	}
	a.edits.Lock()
	defer a.edits.Unlock()
	d, err := a.ownedDraft(s, r.PathValue("draft_id"))
	if err != nil {
		return nil, err
	}
	return op(r.Context(), s, d)
}

// edit runs a change of the caller's draft: fn gets the draft's tree
// (shared: fn must not modify it), checks the request against it, and
// returns the edit, which the store validates where it changes the tree
// and replicates as one small command. An invalid edit changes nothing.
func (a *API) edit(w http.ResponseWriter, r *http.Request, fn func(root *config.Node, s *auth.Scope) (*config.Edit, error)) (any, error) {
	return a.draftOp(r, func(ctx context.Context, s *auth.Scope, d *store.Draft) (any, error) {
		e, err := fn(d.Tree, s)
		if err != nil {
			return nil, err
		}
		sess := store.SessionFromContext(ctx)
		setAnswer(sess, nil)
		if err := a.store.EditDraftPart(ctx, sess, d.ID, s.User, e); err != nil {
			return nil, err
		}
		a.warn(w, r, s.User, unsupportedIn(e))
		return nil, nil
	})
}

// setAnswer records in sess (nil: none) the answer a write gives once its
// command is applied, before it submits the command, so that the same
// request sent again (after a leader failed while it had it, or by a
// client with the same Idempotency-Key) is answered alike (see
// store.Session.SetAnswer).
func setAnswer(sess *store.Session, v any) {
	if sess == nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Not recorded: a resend runs the handler again.
		return
	}
	sess.SetAnswer(http.StatusOK, append(b, '\n'))
}

// decodeBody reads a JSON body and decodes it; a decoding error is a 400.
func decodeBody[T any](a *API, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := a.readJSON(w, r)
	if err != nil {
		return zero, err
	}
	v, err := decode(b)
	if err != nil {
		return zero, badRequest(err)
	}
	return v, nil
}

// nodeBody reads a NodeDetails body.
func (a *API) nodeBody(w http.ResponseWriter, r *http.Request) (*config.Node, error) {
	return decodeBody(a, w, r, config.DecodeNodeEdit)
}

// editWithBody reads the request's body with read, then makes, as edit
// does, the edit that fn builds from it.
func editWithBody[T any](a *API, w http.ResponseWriter, r *http.Request, read func(http.ResponseWriter, *http.Request) (T, error),
	fn func(root *config.Node, s *auth.Scope, body T) (*config.Edit, error)) (any, error) {
	body, err := read(w, r)
	if err != nil {
		return nil, err
	}
	return a.edit(w, r, func(root *config.Node, s *auth.Scope) (*config.Edit, error) {
		return fn(root, s, body)
	})
}

func (a *API) createNode(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.nodeBody, func(root *config.Node, s *auth.Scope, n *config.Node) (*config.Edit, error) {
		return addChild(root, s, r.PathValue("node_path"), n)
	})
}

// addChild returns the edit that appends n to the children of the node at
// nodePath.
func addChild(root *config.Node, s *auth.Scope, nodePath string, n *config.Node) (*config.Edit, error) {
	parent, path, err := resolveNode(root, s, nodePath)
	if err != nil {
		return nil, err
	}
	if parent.Kind == config.KindRuleset {
		return nil, errorf(http.StatusBadRequest, "RULESET_HAS_NO_CHILDREN", "%s is a ruleset: a ruleset cannot have children", config.PathString(path))
	}
	if parent.Child(n.Name) != nil {
		return nil, nameTaken(n.Name)
	}
	return &config.Edit{Op: config.EditAddNode, Path: path, Node: n}, nil
}

func nameTaken(name string) *Error {
	return &Error{Status: http.StatusConflict, Code: "VALIDATION_ERROR", Params: map[string]string{"NODE_NAME": name}, Message: fmt.Sprintf("a sibling is already named %q", name)}
}

func (a *API) editNode(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.nodeBody, func(root *config.Node, s *auth.Scope, body *config.Node) (*config.Edit, error) {
		path, err := resolve(s, r.PathValue("node_path"))
		if err != nil {
			return nil, err
		}
		parent, i, err := childAt(root, path)
		if err != nil {
			return nil, err
		}
		n := parent.Children[i]
		next := *n
		next.Kind, next.Name = body.Kind, body.Name
		if body.Kind != config.KindRuleset {
			next.Description, next.Active, next.Filter, next.Target = body.Description, body.Active, body.Filter, body.Target
		}
		if err := writable(s, path, n, &next); err != nil {
			return nil, err
		}
		if n.Kind != body.Kind {
			return nil, errorf(http.StatusBadRequest, "WRONG_NODE_TYPE", "%s is a %s; the body describes a %s", config.PathString(path), n.Kind, body.Kind)
		}
		if body.Name != n.Name && parent.Child(body.Name) != nil {
			return nil, nameTaken(body.Name)
		}
		return &config.Edit{Op: config.EditUpdateNode, Path: path, Node: body}, nil
	})
}

func (a *API) deleteNode(w http.ResponseWriter, r *http.Request) (any, error) {
	return a.edit(w, r, func(root *config.Node, s *auth.Scope) (*config.Edit, error) {
		path, err := resolve(s, r.PathValue("node_path"))
		if err != nil {
			return nil, err
		}
		if err := writable(s, path, nil, nil); err != nil {
			return nil, err
		}
		if _, _, err := childAt(root, path); err != nil {
			return nil, err
		}
		return &config.Edit{Op: config.EditDeleteNode, Path: path}, nil
	})
}

// importPrefix starts the message of every refusal of an import's file.
const importPrefix = "import: "

// importFile reads the multipart field "file" of an import request. The
// messages of its refusals start with importPrefix.
func (a *API) importFile(w http.ResponseWriter, r *http.Request) (*config.Node, error) {
	n, err := a.readImport(w, r)
	var e *Error
	if errors.As(err, &e) && !strings.HasPrefix(e.Message, importPrefix) {
		e.Message = importPrefix + e.Message
	}
	return n, err
}

// readImport is importFile without the prefix.
func (a *API) readImport(w http.ResponseWriter, r *http.Request) (*config.Node, error) {
	r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxImport)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errorf(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "an import is a multipart/form-data body with a field named file: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, errorf(http.StatusBadRequest, "MISSING_FILE", "the multipart body has no field named file")
		}
		if err != nil {
			if apierror.IsBodyCut(err) {
				return nil, err
			}
			return nil, badRequest(fmt.Errorf("multipart body: %w", err))
		}
		if part.FormName() != "file" {
			continue
		}
		b, err := io.ReadAll(part)
		if err != nil {
			if apierror.IsBodyCut(err) {
				return nil, err
			}
			return nil, badRequest(err)
		}
		if err := checkJSON(b); err != nil {
			return nil, err
		}
		ex, err := config.DecodeExport(b)
		if err != nil {
			return nil, badRequest(fmt.Errorf("file: %w", err))
		}
		if err := a.compiles(ex.Node); err != nil {
			return nil, err
		}
		return ex.Node, nil
	}
}

func (a *API) importChild(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.importFile, func(root *config.Node, s *auth.Scope, n *config.Node) (*config.Edit, error) {
		return addChild(root, s, r.PathValue("node_path"), n)
	})
}

func (a *API) importReplace(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.importFile, func(root *config.Node, s *auth.Scope, n *config.Node) (*config.Edit, error) {
		path, err := resolve(s, r.PathValue("node_path"))
		if err != nil {
			return nil, err
		}
		if len(path) == 1 {
			if _, err := find(root, path); err != nil {
				return nil, err
			}
			// Replacing the root: a root filter replaces the whole tree;
			// anything else becomes the only child of a fresh root.
			if n.Kind == config.KindFilter && n.Name == config.RootName {
				return &config.Edit{Op: config.EditReplaceNode, Path: path, Node: n}, nil
			}
			fresh := config.NewRoot()
			fresh.Children = []*config.Node{n}
			return &config.Edit{Op: config.EditReplaceNode, Path: path, Node: fresh}, nil
		}
		parent, i, err := childAt(root, path)
		if err != nil {
			return nil, err
		}
		if err := writable(s, path, parent.Children[i], n); err != nil {
			return nil, err
		}
		if n.Name != path[len(path)-1] && parent.Child(n.Name) != nil {
			return nil, nameTaken(n.Name)
		}
		return &config.Edit{Op: config.EditReplaceNode, Path: path, Node: n}, nil
	})
}

func (a *API) export(w http.ResponseWriter, r *http.Request) (any, error) {
	n, err := a.readNode(r)
	if err != nil {
		return nil, err
	}
	b, err := config.EncodeExport(n)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%s-%s.json", a.cfg.Hostname, n.Name, time.Now().UTC().Format("20060102T150405Z"))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	return rawResponse(b), nil
}

// ruleBody reads a Rule body.
func (a *API) ruleBody(w http.ResponseWriter, r *http.Request) (*config.Rule, error) {
	return decodeBody(a, w, r, config.DecodeRule)
}

func (a *API) createRule(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.ruleBody, func(root *config.Node, s *auth.Scope, rule *config.Rule) (*config.Edit, error) {
		rs, path, err := ruleset(root, s, r.PathValue("ruleset_path"), http.StatusBadRequest)
		if err != nil {
			return nil, err
		}
		if old, _ := rs.Rule(rule.Name); old != nil {
			return nil, &Error{Status: http.StatusConflict, Code: "VALIDATION_ERROR", Params: map[string]string{"RULE_NAME": rule.Name}, Message: fmt.Sprintf("the ruleset already has a rule named %q", rule.Name)}
		}
		return &config.Edit{Op: config.EditAddRule, Path: path, Rule: rule}, nil
	})
}

// ruleOf finds the ruleset and the index of the rule named in the URL, and
// returns an edit of op for that rule.
func ruleOf(root *config.Node, s *auth.Scope, r *http.Request, op config.EditOp) (*config.Node, *config.Edit, error) {
	rs, path, err := ruleset(root, s, r.PathValue("ruleset_path"), http.StatusBadRequest)
	if err != nil {
		return nil, nil, err
	}
	name := r.PathValue("rule_name")
	if _, i := rs.Rule(name); i < 0 {
		return nil, nil, ruleNotFound(name)
	}
	return rs, &config.Edit{Op: op, Path: path, RuleName: name}, nil
}

func (a *API) editRule(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.ruleBody, func(root *config.Node, s *auth.Scope, rule *config.Rule) (*config.Edit, error) {
		_, e, err := ruleOf(root, s, r, config.EditUpdateRule)
		if err != nil {
			return nil, err
		}
		e.Rule = rule
		return e, nil
	})
}

func (a *API) deleteRule(w http.ResponseWriter, r *http.Request) (any, error) {
	return a.edit(w, r, func(root *config.Node, s *auth.Scope) (*config.Edit, error) {
		_, e, err := ruleOf(root, s, r, config.EditDeleteRule)
		return e, err
	})
}

func (a *API) moveRule(w http.ResponseWriter, r *http.Request) (any, error) {
	return editWithBody(a, w, r, a.positionBody, func(root *config.Node, s *auth.Scope, pos int) (*config.Edit, error) {
		rs, e, err := ruleOf(root, s, r, config.EditMoveRule)
		if err != nil {
			return nil, err
		}
		if pos < 0 || pos >= len(rs.Rules) {
			return nil, errorf(http.StatusBadRequest, "POSITION_OUT_OF_RANGE", "position %d: the ruleset has %d rules (positions 0 to %d)", pos, len(rs.Rules), len(rs.Rules)-1)
		}
		e.Position = pos
		return e, nil
	})
}

// positionBody reads a {"position": N} body.
func (a *API) positionBody(w http.ResponseWriter, r *http.Request) (int, error) {
	b, err := a.readJSON(w, r)
	if err != nil {
		return 0, err
	}
	return decodePosition(b)
}

// decodePosition reads {"position": N}; N may be a number or a numeric
// string (docs/decisions.md decision 6).
func decodePosition(b []byte) (int, error) {
	var body struct {
		Position json.RawMessage `json:"position"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return 0, badRequest(err)
	}
	if body.Position == nil {
		return 0, errorf(http.StatusBadRequest, "BAD_REQUEST", "position: missing")
	}
	raw := bytes.TrimSpace(body.Position)
	if len(raw) > 1 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, badRequest(err)
		}
		raw = []byte(s)
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "BAD_REQUEST", "position: %q is not a whole number", raw)
	}
	return n, nil
}
