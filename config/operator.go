package config

import (
	"maps"

	"github.com/squallhq/squall/internal/jsonvalue"
)

// OpType is the canonical name of an operator.
type OpType string

// The operators. Composite: AND, OR (Operators) and NOT (Operator).
// Binary: First and Second. Regex: Regex and Target.
const (
	OpAnd                OpType = "AND"
	OpOr                 OpType = "OR"
	OpNot                OpType = "NOT"
	OpEquals             OpType = "equals"
	OpNotEquals          OpType = "ne"
	OpEqualsIgnoreCase   OpType = "equalsIgnoreCase"
	OpContains           OpType = "contains"
	OpContainsIgnoreCase OpType = "containsIgnoreCase"
	OpGreaterEqual       OpType = "ge"
	OpGreater            OpType = "gt"
	OpLessEqual          OpType = "le"
	OpLess               OpType = "lt"
	OpRegex              OpType = "regex"
)

// opAliases maps every accepted spelling to the canonical operator name
// (docs/decisions.md decision 13: aliases are accepted everywhere).
var opAliases = map[string]OpType{
	"AND": OpAnd, "OR": OpOr, "NOT": OpNot,
	"equals": OpEquals, "equal": OpEquals,
	"ne": OpNotEquals, "notEquals": OpNotEquals, "notEqual": OpNotEquals,
	"equalsIgnoreCase": OpEqualsIgnoreCase, "equalIgnoreCase": OpEqualsIgnoreCase,
	"contains": OpContains, "contain": OpContains,
	"containsIgnoreCase": OpContainsIgnoreCase, "containIgnoreCase": OpContainsIgnoreCase,
	"ge": OpGreaterEqual, "gt": OpGreater, "le": OpLessEqual, "lt": OpLess,
	"regex": OpRegex,
}

// ParseOpType returns the canonical operator for a name or one of its aliases.
func ParseOpType(name string) (OpType, bool) {
	t, ok := opAliases[name]
	return t, ok
}

// IsBinary reports whether the operator takes first and second.
func (t OpType) IsBinary() bool {
	switch t {
	case OpAnd, OpOr, OpNot, OpRegex:
		return false
	}
	return true
}

// Operator is a condition of a filter or of a rule's WHERE clause.
type Operator struct {
	Type OpType
	// Operators are the children of AND and OR.
	Operators []*Operator
	// Operator is the child of NOT.
	Operator *Operator
	// First and Second are the arguments of binary operators: any JSON value
	// (numbers as json.Number). Strings are accessor expressions.
	First, Second any
	// Regex and Target are the arguments of the regex operator.
	Regex, Target string
}

// Clone returns a deep copy of the operator.
func (o *Operator) Clone() *Operator {
	if o == nil {
		return nil
	}
	c := *o
	c.Operators = cloneSlice(o.Operators, (*Operator).Clone)
	c.Operator = o.Operator.Clone()
	c.First = jsonvalue.Clone(o.First)
	c.Second = jsonvalue.Clone(o.Second)
	return &c
}

// Rule is one rule of a ruleset.
type Rule struct {
	Name        string
	Description string
	// Continue true goes on with the next rules; false stops the ruleset
	// after this rule fully matches (docs/decisions.md decision 1).
	Continue bool
	Active   bool
	// Where is the rule's condition; nil always matches.
	Where *Operator
	// With maps variable names to their extractors.
	With    map[string]*Extractor
	Actions []*Action
}

// Clone returns a deep copy of the rule.
func (r *Rule) Clone() *Rule {
	if r == nil {
		return nil
	}
	c := *r
	c.Where = r.Where.Clone()
	if r.With != nil {
		c.With = make(map[string]*Extractor, len(r.With))
		for k, e := range r.With {
			c.With[k] = e.Clone()
		}
	}
	c.Actions = cloneSlice(r.Actions, (*Action).Clone)
	return &c
}

// Clone returns a deep copy of the action.
func (a *Action) Clone() *Action {
	if a == nil {
		return nil
	}
	c := &Action{ID: a.ID}
	if a.Payload != nil {
		c.Payload = jsonvalue.Clone(a.Payload).(map[string]any)
	}
	return c
}

// RegexKind selects how an extractor applies its regular expression.
type RegexKind uint8

// The extractor regex kinds, named as the API's type tag names them.
const (
	// RegexIndexed ("Regex", key match): groups by index.
	RegexIndexed RegexKind = iota + 1
	// RegexNamed ("RegexNamedGroups", key named_match): named groups as an object.
	RegexNamed
	// RegexSingleKey ("KeyRegex", key single_key_match): the one object entry whose key matches.
	RegexSingleKey
)

// String returns the API type tag of the kind.
func (k RegexKind) String() string {
	switch k {
	case RegexIndexed:
		return "Regex"
	case RegexNamed:
		return "RegexNamedGroups"
	case RegexSingleKey:
		return "KeyRegex"
	}
	return "Unknown"
}

// Extractor is one WITH entry: where to read, the regex, and the modifiers.
type Extractor struct {
	From  string
	Regex ExtractorRegex
	// Modifiers are applied in order to the extracted value.
	Modifiers []*Modifier
}

// Clone returns a deep copy of the extractor.
func (e *Extractor) Clone() *Extractor {
	if e == nil {
		return nil
	}
	c := *e
	if e.Regex.GroupMatchIdx != nil {
		idx := *e.Regex.GroupMatchIdx
		c.Regex.GroupMatchIdx = &idx
	}
	c.Modifiers = cloneSlice(e.Modifiers, func(m *Modifier) *Modifier {
		if m == nil {
			return nil
		}
		mc := *m
		mc.Mapping = maps.Clone(m.Mapping)
		if m.DefaultValue != nil {
			d := *m.DefaultValue
			mc.DefaultValue = &d
		}
		return &mc
	})
	return &c
}

// ExtractorRegex is the regular expression of an extractor.
type ExtractorRegex struct {
	Kind    RegexKind
	Pattern string
	// GroupMatchIdx selects one group (RegexIndexed); nil returns all groups.
	GroupMatchIdx *int
	// AllMatches returns every match instead of the first (RegexIndexed, RegexNamed).
	AllMatches bool
}

// ModifierType names a post-extraction modifier.
type ModifierType string

// The modifiers.
const (
	ModLowercase   ModifierType = "Lowercase"
	ModTrim        ModifierType = "Trim"
	ModToNumber    ModifierType = "ToNumber"
	ModMap         ModifierType = "Map"
	ModReplaceAll  ModifierType = "ReplaceAll"
	ModDateAndTime ModifierType = "DateAndTime"
)

// Modifier transforms an extracted value.
type Modifier struct {
	Type ModifierType
	// Mapping and DefaultValue belong to Map.
	Mapping      map[string]string
	DefaultValue *string
	// Find, Replace and IsRegex belong to ReplaceAll. Replace is an accessor expression.
	Find    string
	Replace string
	IsRegex bool
	// Timezone belongs to DateAndTime: an IANA zone name.
	Timezone string
}

// Action is what a matching rule asks to execute.
type Action struct {
	ID string
	// Payload is a JSON object; its strings are accessor expressions.
	Payload map[string]any
}
