package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// EditOp names the kind of an Edit.
type EditOp string

// The edit kinds. Path is always an absolute node path (from the root).
const (
	// EditAddNode adds Node (with its subtree) as the last child of Path.
	EditAddNode EditOp = "add_node"
	// EditUpdateNode sets the name, description, active flag, filter and
	// target of the node at Path from Node (a ruleset: its name only);
	// its children and rules stay.
	EditUpdateNode EditOp = "update_node"
	// EditDeleteNode deletes the node at Path and its subtree.
	EditDeleteNode EditOp = "delete_node"
	// EditReplaceNode replaces the subtree at Path with Node; at the root
	// Node becomes the whole tree.
	EditReplaceNode EditOp = "replace_node"
	// EditAddRule appends Rule to the ruleset at Path.
	EditAddRule EditOp = "add_rule"
	// EditUpdateRule replaces the rule RuleName of the ruleset at Path.
	EditUpdateRule EditOp = "update_rule"
	// EditDeleteRule deletes the rule RuleName of the ruleset at Path.
	EditDeleteRule EditOp = "delete_rule"
	// EditMoveRule moves the rule RuleName of the ruleset at Path to
	// Position (0 is first).
	EditMoveRule EditOp = "move_rule"
)

// Errors of Edit.Apply besides validation errors (*ValidationError,
// *LimitError); match them with errors.Is.
var (
	ErrNoNode       = errors.New("no such node")
	ErrNoRule       = errors.New("no such rule")
	ErrNotRuleset   = errors.New("not a ruleset")
	ErrNoChildren   = errors.New("a ruleset cannot have children")
	ErrWrongKind    = errors.New("the node is of another type")
	ErrRootNode     = errors.New("the root node cannot be changed this way")
	ErrPosition     = errors.New("position out of range")
	ErrInvalidEdit  = errors.New("invalid edit")
	errMissingField = fmt.Errorf("%w: missing field", ErrInvalidEdit)
)

// Edit is one change of a part of a tree, such as one rule's. Apply
// checks it against the tree it changes and validates only what changes:
// the new or changed node or rule (config.Validate's checks), the
// uniqueness of its name among its siblings, nested iterators, and the
// limits (see MaxNodes) of the tree it makes.
type Edit struct {
	Op   EditOp
	Path []string
	// Node is the node of add_node, update_node and replace_node.
	Node *Node
	// Rule is the rule of add_rule and update_rule.
	Rule *Rule
	// RuleName names the rule of update_rule, delete_rule and move_rule.
	RuleName string
	// Position is the new index of move_rule.
	Position int

	// version is the version of the rules Apply checks: LatestRules,
	// or that of ApplyRules.
	version Rules
}

// Apply returns the tree root with the edit made, and its new size in
// bytes given size, its current size (the length of its compact export
// file: see TreeSize). root is not modified: the result shares every
// subtree the edit does not touch, copying only the nodes on the way from
// the root to the change. An edit that does not apply or would make the
// tree invalid returns an error.
func (e *Edit) Apply(root *Node, size int) (*Node, int, error) {
	return e.ApplyRules(root, size, LatestRules)
}

// ApplyRules is Apply with the checks of version r of the rules (see
// Rules): the masters' state machine uses it with the version of the
// entry it applies.
func (e *Edit) ApplyRules(root *Node, size int, r Rules) (*Node, int, error) {
	if err := r.check(); err != nil {
		return nil, 0, err
	}
	if e.version != r {
		c := *e
		c.version = r
		e = &c
	}
	if root == nil || len(e.Path) == 0 || e.Path[0] != root.Name {
		return nil, 0, e.noNode(e.Path)
	}
	if e.Op == EditReplaceNode && len(e.Path) == 1 {
		if e.Node == nil {
			return nil, 0, errMissingField
		}
		if err := CheckLimits(e.Node); err != nil {
			return nil, 0, err
		}
		if err := ValidateRules(e.Node, e.version); err != nil {
			return nil, 0, err
		}
		n, err := CheckTreeLimits(e.Node)
		if err != nil {
			return nil, 0, err
		}
		return e.Node, n, nil
	}
	chain, err := copyPath(root, e.Path)
	if err != nil {
		return nil, 0, e.noNode(e.Path)
	}
	target := chain[len(chain)-1]
	// under reports whether an iterator is above the target.
	under := slices.ContainsFunc(chain[:len(chain)-1], func(n *Node) bool { return n.Kind == KindIterator })
	switch e.Op {
	case EditAddNode, EditUpdateNode, EditDeleteNode, EditReplaceNode:
		size, err = e.applyNode(chain, under, size)
	case EditAddRule, EditUpdateRule, EditDeleteRule, EditMoveRule:
		if target.Kind != KindRuleset {
			return nil, 0, fmt.Errorf("%w: %s is a %s", ErrNotRuleset, PathString(e.Path), target.Kind)
		}
		size, err = e.applyRule(chain[0], target, size)
	default:
		return nil, 0, fmt.Errorf("%w: unknown operation %q", ErrInvalidEdit, e.Op)
	}
	if err != nil {
		return nil, 0, err
	}
	return chain[0], size, nil
}

func (e *Edit) noNode(path []string) error {
	return fmt.Errorf("%w: %s", ErrNoNode, PathString(path))
}

// copyPath returns copies of the nodes on path, from the root down: each
// copy's Children is a copy of the original's, in which the next node of
// the path is replaced by its copy. The last node's slices are shared.
func copyPath(root *Node, path []string) ([]*Node, error) {
	chain := make([]*Node, 0, len(path))
	c := *root
	chain = append(chain, &c)
	for _, name := range path[1:] {
		parent := chain[len(chain)-1]
		i := slices.IndexFunc(parent.Children, func(n *Node) bool { return n.Name == name })
		if i < 0 || parent.Kind == KindRuleset {
			return nil, ErrNoNode
		}
		parent.Children = slices.Clone(parent.Children)
		c := *parent.Children[i]
		parent.Children[i] = &c
		chain = append(chain, &c)
	}
	return chain, nil
}

func (e *Edit) applyNode(chain []*Node, under bool, size int) (int, error) {
	target := chain[len(chain)-1]
	if e.Op == EditAddNode {
		if e.Node == nil {
			return 0, errMissingField
		}
		if target.Kind == KindRuleset {
			return 0, fmt.Errorf("%w: %s", ErrNoChildren, PathString(e.Path))
		}
		if err := e.checkNew(chain[0], e.Path, target, "", e.Node, under || target.Kind == KindIterator, nil); err != nil {
			return 0, err
		}
		add, err := nodeLen(e.Node)
		if err != nil {
			return 0, err
		}
		size += add + comma(len(target.Children) > 0)
		if err := CheckSize(0, 0, size); err != nil {
			return 0, err
		}
		target.Children = append(slices.Clip(target.Children), e.Node)
		return size, nil
	}
	if len(chain) < 2 {
		return 0, ErrRootNode
	}
	parent := chain[len(chain)-2]
	parentPath := e.Path[:len(e.Path)-1]
	i := slices.Index(parent.Children, target)
	switch e.Op {
	case EditDeleteNode:
		old, err := nodeLen(target)
		if err != nil {
			return 0, err
		}
		size -= old + comma(len(parent.Children) > 1)
		parent.Children = slices.Delete(parent.Children, i, i+1)
		return size, nil
	case EditReplaceNode:
		if e.Node == nil {
			return 0, errMissingField
		}
		if err := e.checkNew(chain[0], parentPath, parent, target.Name, e.Node, under, target); err != nil {
			return 0, err
		}
		old, err := nodeLen(target)
		if err != nil {
			return 0, err
		}
		add, err := nodeLen(e.Node)
		if err != nil {
			return 0, err
		}
		if err := CheckSize(0, 0, size-old+add); err != nil {
			return 0, err
		}
		parent.Children[i] = e.Node
		return size - old + add, nil
	}
	// update_node
	if e.Node == nil {
		return 0, errMissingField
	}
	if e.Node.Kind != target.Kind {
		return 0, fmt.Errorf("%w: %s is a %s, not a %s", ErrWrongKind, PathString(e.Path), target.Kind, e.Node.Kind)
	}
	next := *target
	next.Name = e.Node.Name
	if next.Kind != KindRuleset {
		next.Description, next.Active, next.Filter, next.Target = e.Node.Description, e.Node.Active, e.Node.Filter, e.Node.Target
	}
	// Validate the node's own fields: its subtree is unchanged.
	own := next
	own.Children, own.Rules = nil, nil
	oldOwn := *target
	oldOwn.Children, oldOwn.Rules = nil, nil
	if err := e.checkNew(chain[0], parentPath, parent, target.Name, &own, under, &oldOwn); err != nil {
		return 0, err
	}
	before, err := TreeSize(&oldOwn)
	if err != nil {
		return 0, err
	}
	after, err := TreeSize(&own)
	if err != nil {
		return 0, err
	}
	if err := CheckSize(0, 0, size-before+after); err != nil {
		return 0, err
	}
	*target = next
	return size - before + after, nil
}

// checkNew validates n, about to become a child of parent (at parentPath)
// in place of the child named replacing (if any): its subtree, its name
// among its siblings, and the limits of the whole tree rooted at root
// once old (the subtree it replaces, if any) is gone.
func (e *Edit) checkNew(root *Node, parentPath []string, parent *Node, replacing string, n *Node, under bool, old *Node) error {
	if _, _, err := checkNames(parentPath, n); err != nil {
		return err
	}
	v := &validator{version: e.version}
	v.node(parentPath, n, under)
	if len(v.errs) > 0 {
		return errors.Join(v.errs...)
	}
	if n.Name != replacing && parent.Child(n.Name) != nil {
		return &ValidationError{Path: slices.Clone(parentPath), Field: "nodes", Err: fmt.Errorf("%w: two children are named %q", ErrDuplicateName, n.Name)}
	}
	if v.nodes == 0 && v.nrules == 0 {
		return nil
	}
	nodes, rules := countNodes(root)
	if old != nil {
		on, or := countNodes(old)
		nodes, rules = nodes-on, rules-or
	}
	if err := CheckSize(nodes+v.nodes, rules+v.nrules, -1); err != nil {
		return &ValidationError{Path: []string{root.Name}, Err: err}
	}
	return nil
}

// countNodes returns the number of nodes and rules of a subtree.
func countNodes(n *Node) (nodes, rules int) {
	n.Walk(func(_ []string, x *Node) bool {
		nodes++
		rules += len(x.Rules)
		return true
	})
	return nodes, rules
}

func (e *Edit) applyRule(root, rs *Node, size int) (int, error) {
	i := -1
	if e.Op != EditAddRule {
		if _, i = rs.Rule(e.RuleName); i < 0 {
			return 0, fmt.Errorf("%w: %s in %s", ErrNoRule, e.RuleName, PathString(e.Path))
		}
	}
	rules := slices.Clone(rs.Rules)
	switch e.Op {
	case EditDeleteRule:
		old, err := ruleSize(rules[i])
		if err != nil {
			return 0, err
		}
		size -= old + comma(len(rules) > 1)
		rs.Rules = slices.Delete(rules, i, i+1)
		return size, nil
	case EditMoveRule:
		if e.Position < 0 || e.Position >= len(rules) {
			return 0, fmt.Errorf("%w: position %d: the ruleset has %d rules (positions 0 to %d)", ErrPosition, e.Position, len(rules), len(rules)-1)
		}
		r := rules[i]
		rs.Rules = slices.Insert(slices.Delete(rules, i, i+1), e.Position, r)
		return size, nil
	}
	if e.Rule == nil {
		return 0, errMissingField
	}
	if err := checkRuleName(e.Path, e.Rule); err != nil {
		return 0, err
	}
	v := &validator{version: e.version, path: slices.Clone(e.Path)}
	v.rules([]*Rule{e.Rule})
	if len(v.errs) > 0 {
		return 0, errors.Join(v.errs...)
	}
	if other, j := rs.Rule(e.Rule.Name); other != nil && j != i {
		return 0, &ValidationError{Path: slices.Clone(e.Path), Rule: e.Rule.Name, Field: "name", Err: fmt.Errorf("%w: two rules are named %q", ErrDuplicateName, e.Rule.Name)}
	}
	add, err := ruleSize(e.Rule)
	if err != nil {
		return 0, err
	}
	if e.Op == EditAddRule {
		if _, n := countNodes(root); n+1 > MaxRules {
			return 0, &ValidationError{Path: slices.Clone(e.Path), Err: &LimitError{Limit: LimitRules, Max: MaxRules, Value: n + 1}}
		}
		size += add + comma(len(rules) > 0)
		if err := CheckSize(0, 0, size); err != nil {
			return 0, err
		}
		rs.Rules = append(rules, e.Rule)
		return size, nil
	}
	old, err := ruleSize(rules[i])
	if err != nil {
		return 0, err
	}
	size += add - old
	if err := CheckSize(0, 0, size); err != nil {
		return 0, err
	}
	rules[i] = e.Rule
	rs.Rules = rules
	return size, nil
}

// TreeSize returns the length of the compact export file of the subtree
// at n, the measure of MaxTreeBytes.
func TreeSize(n *Node) (int, error) {
	b, err := json.Marshal(&Export{Version: ExportVersion, Node: n})
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", n.Name, err)
	}
	return len(b), nil
}

// exportPrefix is what the export file adds around a node's JSON: its
// {"version":"1.1", replaces the node's opening brace.
const exportPrefix = len(`{"version":"1.1",`) - 1

// nodeLen returns the length of the compact JSON of the subtree at n as
// it appears in its parent's nodes.
func nodeLen(n *Node) (int, error) {
	size, err := TreeSize(n)
	return size - exportPrefix, err
}

// comma is the length of the separator before a new element of a list
// that already had one.
func comma(had bool) int {
	if had {
		return 1
	}
	return 0
}

// ruleSize returns the length of a rule's export form.
func ruleSize(r *Rule) (int, error) {
	b, err := json.Marshal(r.toJSON(FormExport))
	if err != nil {
		return 0, fmt.Errorf("encode rule %s: %w", r.Name, err)
	}
	return len(b), nil
}
