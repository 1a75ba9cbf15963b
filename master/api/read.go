package api

import (
	"net/http"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/auth"
)

// readTree authenticates a read and returns the tree it reads: the active
// tree, or the draft when the route has a draft_id. Reading a draft needs
// view only, whoever owns it, unless its takeover displaced the caller
// (decision 8).
func (a *API) readTree(r *http.Request) (*config.Node, *auth.Scope, error) {
	s, err := a.scope(r, auth.View)
	if err != nil {
		return nil, nil, err
	}
	if id := r.PathValue("draft_id"); id != "" {
		d, err := a.readableDraft(s, id)
		if err != nil {
			return nil, nil, err
		}
		return d.Tree, s, nil
	}
	root, _ := a.store.Active()
	return root, s, nil
}

func (a *API) activeInfo(_ http.ResponseWriter, r *http.Request) (any, error) {
	root, s, err := a.readTree(r)
	if err != nil {
		return nil, err
	}
	n, err := find(root, s.Base())
	if err != nil {
		return nil, err
	}
	return n.Count(), nil
}

// children lists the authorization's own node without a node path, else
// the children of the node at node_path (docs/decisions.md decision 5).
func (a *API) children(r *http.Request) (any, error) {
	root, s, err := a.readTree(r)
	if err != nil {
		return nil, err
	}
	nodePath := r.PathValue("node_path")
	n, path, err := resolveNode(root, s, nodePath)
	if err != nil {
		return nil, err
	}
	if nodePath == "" {
		return []config.NodeInfo{n.Info(hasIteratorAncestor(root, path))}, nil
	}
	if n.Kind == config.KindRuleset {
		return nil, &Error{Status: http.StatusNotFound, Code: "NOT_A_PARENT", Params: map[string]string{"PATH": config.PathString(path)}, Message: "a ruleset has no children: " + config.PathString(path)}
	}
	under := n.Kind == config.KindIterator || hasIteratorAncestor(root, path)
	out := make([]config.NodeInfo, 0, len(n.Children))
	for _, c := range n.Children {
		out = append(out, c.Info(under))
	}
	return out, nil
}

func (a *API) activeChildren(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.children(r)
}

func (a *API) draftChildren(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.children(r)
}

// readNode reads the node at the request's node_path in the tree it
// names (active or draft), within the token's scope.
func (a *API) readNode(r *http.Request) (*config.Node, error) {
	root, s, err := a.readTree(r)
	if err != nil {
		return nil, err
	}
	n, _, err := resolveNode(root, s, r.PathValue("node_path"))
	return n, err
}

func (a *API) details(r *http.Request) (any, error) {
	n, err := a.readNode(r)
	if err != nil {
		return nil, err
	}
	return config.NodeDetails{Node: n}, nil
}

func (a *API) activeDetails(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.details(r)
}

func (a *API) draftDetails(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.details(r)
}

func (a *API) rule(r *http.Request) (any, error) {
	root, s, err := a.readTree(r)
	if err != nil {
		return nil, err
	}
	rs, _, err := ruleset(root, s, r.PathValue("ruleset_path"), http.StatusNotFound)
	if err != nil {
		return nil, err
	}
	rule, _ := rs.Rule(r.PathValue("rule_name"))
	if rule == nil {
		return nil, ruleNotFound(r.PathValue("rule_name"))
	}
	return rule, nil
}

func (a *API) activeRule(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.rule(r)
}

func (a *API) draftRule(_ http.ResponseWriter, r *http.Request) (any, error) {
	return a.rule(r)
}

// ruleset finds the ruleset at a URL path; notRuleset is the status when
// the node is not a ruleset (404 on reads, 400 on writes).
func ruleset(root *config.Node, s *auth.Scope, rulesetPath string, notRuleset int) (*config.Node, []string, error) {
	n, path, err := resolveNode(root, s, rulesetPath)
	if err != nil {
		return nil, nil, err
	}
	if n.Kind != config.KindRuleset {
		p := config.PathString(path)
		return nil, nil, &Error{Status: notRuleset, Code: "NOT_A_RULESET", Params: map[string]string{"PATH": p}, Message: p + " is a " + n.Kind.String() + ", not a Ruleset"}
	}
	return n, path, nil
}

func ruleNotFound(name string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "RULE_NOT_FOUND", Params: map[string]string{"RULE_NAME": name}, Message: "no rule " + name}
}
