package api

import (
	"net/http"
	"strings"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

func (a *API) eventActive(w http.ResponseWriter, r *http.Request) (any, error) {
	return a.testEvent(w, r, false)
}

func (a *API) eventDraft(w http.ResponseWriter, r *http.Request) (any, error) {
	return a.testEvent(w, r, true)
}

// testEvent evaluates a test event against the active tree or the caller's
// draft, from the authorization's node (docs/decisions.md decision 7). With
// process_type Full, the actions of matched rules are executed; with
// explain, the answer says why each filter, iterator and rule came out as
// it did.
func (a *API) testEvent(w http.ResponseWriter, r *http.Request, draft bool) (any, error) {
	b, err := a.readJSON(w, r)
	if err != nil {
		return nil, err
	}
	req, err := tree.DecodeRequest(b)
	if err != nil {
		return nil, badRequest(err)
	}
	s, err := a.scope(r, auth.View)
	if err != nil {
		return nil, err
	}
	if req.ProcessType == tree.Full {
		if _, err := a.scope(r, auth.ExecuteTestActions); err != nil {
			return nil, err
		}
		if a.actions == nil {
			return nil, errorf(http.StatusForbidden, "ACTIONS_DISABLED", "this node does not execute actions: send the event with process_type SkipActions")
		}
	}
	var tr *tree.Tree
	if draft {
		// SkipActions only reads the draft (view, anyone's but a
		// displaced owner's); Full runs its actions, which only its owner
		// or an admin may (decision 8).
		get := func(id string) (*store.Draft, error) { return a.readableDraft(s, id) }
		if req.ProcessType == tree.Full && !s.Grants(auth.Admin) {
			get = func(id string) (*store.Draft, error) { return a.ownedDraft(s, id) }
		}
		d, err := get(r.PathValue("draft_id"))
		if err != nil {
			return nil, err
		}
		n, err := find(d.Tree, s.Base())
		if err != nil {
			return nil, err
		}
		if tr, err = tree.Compile(n); err != nil {
			return nil, validationError(err)
		}
	} else if tr, err = a.compiledActive(s.Base()); err != nil {
		return nil, err
	}
	result, actions := tr.Process(req.Event)
	resp := testEventResponse{Response: tree.Response{Event: req.Sent, Result: result}}
	if req.Explain {
		resp.Explain = tr.Explain(req.Event, tree.DefaultExplainLimits())
	}
	if req.ProcessType == tree.Full {
		for i, act := range actions {
			if err := a.actions.Run(r.Context(), act); err != nil {
				a.logger.Warn("test event action failed", "user", s.User, "action", act.ID, "error", err)
				resp.ActionErrors = append(resp.ActionErrors, actionError{Index: i, ID: act.ID, Message: err.Error()})
			}
		}
	}
	return resp, nil
}

// testEventResponse is the answer to a test event: the spec's event and
// result, with explain the explanation, and with process_type Full the
// actions that failed (extensions: absent when not asked for, or when
// every action ran).
type testEventResponse struct {
	tree.Response
	ActionErrors []actionError `json:"action_errors,omitempty"`
}

// actionError is an action of a Full test event that failed: its position
// among the event's actions, its id, and why (for an executor the node
// does not enable, how to enable it).
type actionError struct {
	Index   int    `json:"index"`
	ID      string `json:"id"`
	Message string `json:"message"`
}

// compiledActive returns the compiled subtree of the active tree at path,
// compiling it once per version of the active tree.
func (a *API) compiledActive(path []string) (*tree.Tree, error) {
	root, index := a.store.Active()
	key := strings.Join(path, ",")
	a.compiledMu.Lock()
	defer a.compiledMu.Unlock()
	if a.compiledAt != index {
		clear(a.compiled)
		a.compiledAt = index
	}
	if tr, ok := a.compiled[key]; ok {
		return tr, nil
	}
	n, err := find(root, path)
	if err != nil {
		return nil, err
	}
	tr, err := tree.Compile(n)
	if err != nil {
		return nil, validationError(err)
	}
	a.compiled[key] = tr
	return tr, nil
}
