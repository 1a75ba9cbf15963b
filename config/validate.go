package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	// Time zones of DateAndTime modifiers must resolve on machines without
	// a zoneinfo database (containers).
	_ "time/tzdata"
)

// Validation error classes; match them with errors.Is.
var (
	ErrInvalidName     = errors.New("invalid name: it must match ^[a-zA-Z0-9_]+$")
	ErrDuplicateName   = errors.New("name is not unique")
	ErrNestedIterator  = errors.New("an iterator may not be nested inside another iterator")
	ErrInvalidRegex    = errors.New("invalid regular expression")
	ErrInvalidAccessor = errors.New("invalid accessor")
	ErrUnknownTimezone = errors.New("unknown time zone")
	ErrInvalidNode     = errors.New("invalid node")
	ErrInvalidOperator = errors.New("invalid operator")
)

// ValidationError names where in the tree a problem is: the node path
// (names from the root, joined by dots), the rule if any, and the field.
type ValidationError struct {
	Path  []string
	Rule  string
	Field string
	Err   error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("node ")
	b.WriteString(PathString(e.Path))
	if e.Rule != "" {
		fmt.Fprintf(&b, ", rule %s", e.Rule)
	}
	if e.Field != "" {
		b.WriteString(", ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ValidationError) Unwrap() error { return e.Err }

// maxValidationErrors bounds how many problems Validate reports at once.
const maxValidationErrors = 50

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)

// ValidName reports whether s is a valid node, rule, variable or action name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Rules is a version of the checks Validate makes. The masters' state
// machine validates every tree a raft log entry carries with the version
// of the cluster feature level the entry was written under (master/store,
// docs/decisions.md decision 52), so that masters of different releases
// decide alike: a version, once released, accepts forever the trees it
// accepts, and a new check comes only as a new version, used once every
// master knows it.
type Rules int

const (
	// Rules1 is the first version: names, unique names, node kinds and
	// fields, no nested iterators, and every regular expression, accessor
	// and time zone compiling.
	Rules1 Rules = 1
	// LatestRules is the newest version: the checks of Validate.
	LatestRules = Rules1
)

// ErrUnknownRules is the error of a validation with a version of the
// rules that this package does not have.
var ErrUnknownRules = errors.New("unknown version of the validation rules")

// Validate checks a whole tree rooted at n with the newest rules
// (LatestRules): names, unique sibling node names and rule names, node
// kinds and their fields, no nested iterators, and that every regular
// expression, accessor and time zone compiles. Unlike Tornado, inactive
// nodes and rules are checked too. The limits (see MaxNodes) are
// CheckLimits's. It returns every problem found (up to a bound) joined;
// each is a *ValidationError.
func Validate(n *Node) error { return ValidateRules(n, LatestRules) }

// ValidateRules is Validate with the checks of version r. The state
// machine of the masters uses it, with the version of the entry it
// applies: it must never refuse a tree that version once accepted.
func ValidateRules(n *Node, r Rules) error {
	if err := r.check(); err != nil {
		return err
	}
	v := &validator{version: r}
	v.node(nil, n, false)
	return errors.Join(v.errs...)
}

// check returns ErrUnknownRules when r is not a version of the rules.
func (r Rules) check() error {
	if r < Rules1 || r > LatestRules {
		return fmt.Errorf("%w: %d (this build has 1 to %d)", ErrUnknownRules, r, LatestRules)
	}
	return nil
}

type validator struct {
	// version is the version of the rules checked (see Rules): a check
	// added by a later version runs only when version is at least it.
	version Rules
	errs    []error
	// nodes and nrules count what was checked.
	nodes, nrules int
	// where is the location being checked.
	path []string
	rule string
	// prefix locates fields of a rule that has no name: rules[i].
	prefix string
	// regexps and exprs remember what was compiled or parsed already:
	// large trees repeat the same patterns and expressions in every rule.
	regexps map[string]compiledRegex
	exprs   map[string]error
}

type compiledRegex struct {
	re  *regexp.Regexp
	err error
}

func (v *validator) add(fieldName string, err error) {
	if len(v.errs) >= maxValidationErrors {
		return
	}
	if v.prefix != "" {
		fieldName = strings.TrimSuffix(v.prefix+fieldName, ".")
	}
	v.errs = append(v.errs, &ValidationError{Path: slices.Clone(v.path), Rule: v.rule, Field: fieldName, Err: err})
}

func (v *validator) node(parent []string, n *Node, underIterator bool) {
	if n == nil {
		v.path = parent
		v.add("", fmt.Errorf("%w: missing node", ErrInvalidNode))
		return
	}
	v.path = append(parent[:len(parent):len(parent)], shortName(n.Name))
	v.rule = ""
	v.nodes++
	if !ValidName(n.Name) {
		v.add("name", fmt.Errorf("%w: %q", ErrInvalidName, shortName(n.Name)))
	}
	switch n.Kind {
	case KindFilter:
		if n.Filter != nil {
			v.operator("filter", n.Filter)
		}
	case KindIterator:
		if underIterator {
			v.add("", ErrNestedIterator)
		}
		if _, err := ParseTarget(n.Target); err != nil {
			v.add("target", fmt.Errorf("%w: %w", ErrInvalidAccessor, err))
		}
	case KindRuleset:
		if len(n.Children) > 0 {
			v.add("nodes", fmt.Errorf("%w: a ruleset cannot have children", ErrInvalidNode))
		}
		v.rules(n.Rules)
		return
	default:
		v.add("type", fmt.Errorf("%w: unknown kind %d", ErrInvalidNode, n.Kind))
		return
	}
	if len(n.Rules) > 0 {
		v.add("rules", fmt.Errorf("%w: only a ruleset has rules", ErrInvalidNode))
	}
	here := v.path
	seen := make(map[string]bool, len(n.Children))
	for _, c := range n.Children {
		if c != nil && seen[c.Name] {
			v.path = here
			v.rule = ""
			v.add("nodes", fmt.Errorf("%w: two children are named %q", ErrDuplicateName, c.Name))
		}
		if c != nil {
			seen[c.Name] = true
		}
		v.node(here, c, underIterator || n.Kind == KindIterator)
	}
}

func (v *validator) rules(rules []*Rule) {
	v.nrules += len(rules)
	seen := make(map[string]bool, len(rules))
	for i, r := range rules {
		if r == nil {
			v.rule = ""
			v.add(fmt.Sprintf("rules[%d]", i), fmt.Errorf("%w: missing rule", ErrInvalidNode))
			continue
		}
		v.rule = shortName(r.Name)
		if r.Name == "" {
			// Nothing else would tell which rule this is.
			v.prefix = fmt.Sprintf("rules[%d].", i)
		}
		if !ValidName(r.Name) {
			v.add("name", fmt.Errorf("%w: %q", ErrInvalidName, shortName(r.Name)))
		}
		if seen[r.Name] {
			v.add("name", fmt.Errorf("%w: two rules are named %q", ErrDuplicateName, r.Name))
		}
		seen[r.Name] = true
		v.rule1(r)
		v.prefix = ""
	}
	v.rule = ""
}

// shortName cuts a name that is over MaxNameLength for error messages.
func shortName(name string) string {
	if len(name) <= MaxNameLength {
		return name
	}
	return name[:32] + "..."
}

func (v *validator) rule1(r *Rule) {
	if r.Where != nil {
		v.operator("constraint.WHERE", r.Where)
	}
	for _, name := range slices.Sorted(mapsKeys(r.With)) {
		f := "constraint.WITH." + name
		if !ValidName(name) {
			v.add(f, fmt.Errorf("%w: variable %q", ErrInvalidName, name))
		}
		ex := r.With[name]
		if ex == nil {
			v.add(f, fmt.Errorf("%w: missing extractor", ErrInvalidNode))
			continue
		}
		v.expr(f+".from", ex.From)
		v.extractorRegex(f+".regex", ex.Regex)
		for i, m := range ex.Modifiers {
			v.modifier(fmt.Sprintf("%s.modifiers_post[%d]", f, i), m)
		}
	}
	for i, a := range r.Actions {
		f := fmt.Sprintf("actions[%d]", i)
		if a == nil {
			v.add(f, fmt.Errorf("%w: missing action", ErrInvalidNode))
			continue
		}
		if !ValidName(a.ID) {
			v.add(f+".id", fmt.Errorf("%w: action id %q", ErrInvalidName, a.ID))
		}
		if a.Payload == nil {
			v.add(f+".payload", fmt.Errorf("%w: the payload must be an object", ErrInvalidNode))
		}
		v.payload(f+".payload", a.Payload)
	}
}

// payload checks every string of an action payload, at any depth.
func (v *validator) payload(f string, val any) {
	switch x := val.(type) {
	case string:
		v.expr(f, x)
	case map[string]any:
		for _, k := range slices.Sorted(mapsKeys(x)) {
			v.payload(f+"."+k, x[k])
		}
	case []any:
		for i, e := range x {
			v.payload(fmt.Sprintf("%s[%d]", f, i), e)
		}
	}
}

func (v *validator) expr(f, s string) {
	err, ok := v.exprs[s]
	if !ok {
		_, err = ParseExpr(s)
		if v.exprs == nil {
			v.exprs = map[string]error{}
		}
		v.exprs[s] = err
	}
	if err != nil {
		v.add(f, fmt.Errorf("%w: %w", ErrInvalidAccessor, err))
	}
}

func (v *validator) regex(f, pattern string) *regexp.Regexp {
	c, ok := v.regexps[pattern]
	if !ok {
		c.re, c.err = regexp.Compile(pattern)
		if v.regexps == nil {
			v.regexps = map[string]compiledRegex{}
		}
		v.regexps[pattern] = c
	}
	re, err := c.re, c.err
	if err != nil {
		v.add(f, fmt.Errorf("%w: %w", ErrInvalidRegex, err))
		return nil
	}
	return re
}

func (v *validator) operator(f string, op *Operator) {
	if op == nil {
		v.add(f, fmt.Errorf("%w: missing operator", ErrInvalidOperator))
		return
	}
	if t, ok := ParseOpType(string(op.Type)); !ok || t != op.Type {
		// Aliases are a decoding matter: the model holds canonical names only.
		v.add(f+".type", fmt.Errorf("%w: unknown operator %q", ErrInvalidOperator, op.Type))
		return
	}
	switch op.Type {
	case OpAnd, OpOr:
		for i, c := range op.Operators {
			v.operator(fmt.Sprintf("%s.operators[%d]", f, i), c)
		}
	case OpNot:
		v.operator(f+".operator", op.Operator)
	case OpRegex:
		v.regex(f+".regex", op.Regex)
		v.expr(f+".target", op.Target)
	default:
		if s, ok := op.First.(string); ok {
			v.expr(f+".first", s)
		}
		if s, ok := op.Second.(string); ok {
			v.expr(f+".second", s)
		}
	}
}

func (v *validator) extractorRegex(f string, re ExtractorRegex) {
	switch re.Kind {
	case RegexIndexed, RegexSingleKey:
		v.regex(f, re.Pattern)
	case RegexNamed:
		if c := v.regex(f, re.Pattern); c != nil && !slices.ContainsFunc(c.SubexpNames(), func(s string) bool { return s != "" }) {
			v.add(f, fmt.Errorf("%w: named_match needs at least one named group (?P<name>...)", ErrInvalidRegex))
		}
	default:
		v.add(f, fmt.Errorf("%w: unknown extractor regex kind", ErrInvalidRegex))
	}
}

func (v *validator) modifier(f string, m *Modifier) {
	if m == nil {
		v.add(f, fmt.Errorf("%w: missing modifier", ErrInvalidNode))
		return
	}
	switch m.Type {
	case ModLowercase, ModTrim, ModToNumber:
	case ModMap:
		if m.Mapping == nil {
			v.add(f+".mapping", fmt.Errorf("%w: Map needs a mapping", ErrInvalidNode))
		}
	case ModReplaceAll:
		if m.IsRegex {
			v.regex(f+".find", m.Find)
		}
		v.expr(f+".replace", m.Replace)
	case ModDateAndTime:
		if _, err := LoadTimezone(m.Timezone); err != nil {
			v.add(f+".timezone", err)
		}
	default:
		v.add(f+".type", fmt.Errorf("%w: unknown modifier %q", ErrInvalidNode, m.Type))
	}
}

// LoadTimezone resolves an IANA time zone name (surrounding spaces ignored).
func LoadTimezone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTimezone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTimezone, name)
	}
	return loc, nil
}
