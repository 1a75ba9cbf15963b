package config

import (
	"errors"
	"fmt"
)

// The limits of a processing tree. They bound what one tree costs to
// validate, compile, replicate and evaluate; docs/rules.md lists them.
const (
	// MaxNameLength is the longest node or rule name, in bytes.
	MaxNameLength = 128
	// MaxNodes is the most nodes (filters, iterators and rulesets, the
	// root included) a tree may hold.
	MaxNodes = 10_000
	// MaxRules is the most rules a tree may hold, all rulesets together.
	MaxRules = 100_000
	// MaxTreeBytes is the largest size of a tree, measured as its compact
	// export file.
	MaxTreeBytes = 64 << 20
)

// The names of the limits, as LimitError.Limit writes them.
const (
	LimitNodeNameLength = "node_name_length"
	LimitRuleNameLength = "rule_name_length"
	LimitNodes          = "nodes"
	LimitRules          = "rules"
	LimitTreeBytes      = "tree_bytes"
)

// ErrLimit is the class of LimitError: a tree that would exceed a limit.
var ErrLimit = errors.New("limit exceeded")

// LimitError is a tree that would exceed one of the limits above. It
// matches ErrLimit with errors.Is.
type LimitError struct {
	// Limit names the limit (LimitNodes, ...), Max is its value, Value
	// what the tree would have.
	Limit string
	Max   int
	Value int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s is %d, at most %d is allowed", ErrLimit, e.Limit, e.Value, e.Max)
}

// Is reports whether target is ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// CheckSize checks the number of nodes and rules of a tree, and its size
// in bytes when size is not negative.
func CheckSize(nodes, rules, size int) error {
	var errs []error
	if nodes > MaxNodes {
		errs = append(errs, &LimitError{Limit: LimitNodes, Max: MaxNodes, Value: nodes})
	}
	if rules > MaxRules {
		errs = append(errs, &LimitError{Limit: LimitRules, Max: MaxRules, Value: rules})
	}
	if size > MaxTreeBytes {
		errs = append(errs, &LimitError{Limit: LimitTreeBytes, Max: MaxTreeBytes, Value: size})
	}
	return errors.Join(errs...)
}

// CheckLimits checks the tree rooted at n against the limits on name
// lengths and on the numbers of nodes and rules. Every change of a draft
// through the API is checked (see Edit); the byte limit is checked by
// Edit, which knows the tree's size.
func CheckLimits(n *Node) error {
	nodes, rules, err := checkNames(nil, n)
	if err != nil {
		return err
	}
	if err := CheckSize(nodes, rules, -1); err != nil {
		return &ValidationError{Path: []string{n.Name}, Err: err}
	}
	return nil
}

// CheckTreeLimits checks a whole tree against every limit: CheckLimits's
// and its size in bytes (the length of its compact export file), which it
// returns. A tree that replaces another whole (an import, a restore)
// passes it.
func CheckTreeLimits(n *Node) (int, error) {
	if err := CheckLimits(n); err != nil {
		return 0, err
	}
	size, err := TreeSize(n)
	if err != nil {
		return 0, err
	}
	if err := CheckSize(0, 0, size); err != nil {
		return 0, &ValidationError{Path: []string{n.Name}, Err: err}
	}
	return size, nil
}

// checkNames checks the name lengths of the subtree at n, below parent,
// and counts its nodes and rules.
func checkNames(parent []string, n *Node) (nodes, rules int, err error) {
	path := append(parent[:len(parent):len(parent)], shortName(n.Name))
	if len(n.Name) > MaxNameLength {
		return 0, 0, &ValidationError{Path: path, Field: "name", Err: &LimitError{Limit: LimitNodeNameLength, Max: MaxNameLength, Value: len(n.Name)}}
	}
	for _, r := range n.Rules {
		if err := checkRuleName(path, r); err != nil {
			return 0, 0, err
		}
	}
	nodes, rules = 1, len(n.Rules)
	for _, c := range n.Children {
		cn, cr, err := checkNames(path, c)
		if err != nil {
			return 0, 0, err
		}
		nodes, rules = nodes+cn, rules+cr
	}
	return nodes, rules, nil
}

func checkRuleName(path []string, r *Rule) error {
	if len(r.Name) > MaxNameLength {
		return &ValidationError{Path: path, Rule: shortName(r.Name), Field: "name", Err: &LimitError{Limit: LimitRuleNameLength, Max: MaxNameLength, Value: len(r.Name)}}
	}
	return nil
}
