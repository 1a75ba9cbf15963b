package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
)

// DecodeError is returned for JSON that does not have the expected shape.
// Field is a dotted path to the offending value inside the document.
type DecodeError struct {
	Field string
	Err   error
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrUnknownField, ErrDuplicateField, ErrMissingField, ErrWrongType and
// ErrInvalidValue classify decode errors. An unknown operator name is an
// ErrInvalidOperator.
var (
	ErrUnknownField   = errors.New("unknown field")
	ErrDuplicateField = errors.New("duplicate field")
	ErrMissingField   = errors.New("missing required field")
	ErrWrongType      = errors.New("wrong type")
	// ErrInvalidValue is a value of the right JSON type that is not allowed:
	// an unknown modifier, regex or node type, an unsupported version, a
	// negative group index, or mutually exclusive keys given together.
	ErrInvalidValue = errors.New("invalid value")
)

func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// object is a JSON object whose fields are checked off as they are read, so
// that unknown fields can be reported.
type object struct {
	path   string
	fields map[string]json.RawMessage
	seen   map[string]bool
}

// parseObject splits a JSON object into its fields. A key given twice is an
// error, as in Tornado (serde rejects duplicate struct fields). data is part
// of a document that passed checkJSON.
func parseObject(path string, data json.RawMessage) (*object, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, &DecodeError{Field: path, Err: fmt.Errorf("%w: expected a JSON object", ErrWrongType)}
	}
	members, err := splitObject(data)
	if err != nil {
		return nil, &DecodeError{Field: path, Err: err}
	}
	m := make(map[string]json.RawMessage, len(members))
	for _, mb := range members {
		if _, dup := m[mb.key]; dup {
			return nil, &DecodeError{Field: field(path, mb.key), Err: ErrDuplicateField}
		}
		m[mb.key] = mb.val
	}
	return &object{path: path, fields: m, seen: map[string]bool{}}, nil
}

// has reports whether the field is present (null counts as present).
func (o *object) has(name string) bool {
	_, ok := o.fields[name]
	return ok
}

// isNull reports whether the field is absent or null.
func (o *object) isNull(name string) bool {
	raw, ok := o.fields[name]
	return !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (o *object) raw(name string, required bool) (json.RawMessage, error) {
	o.seen[name] = true
	raw, ok := o.fields[name]
	if !ok {
		if required {
			return nil, &DecodeError{Field: field(o.path, name), Err: ErrMissingField}
		}
		return nil, nil
	}
	return raw, nil
}

// get decodes a field into v. Absent optional fields leave v untouched.
// JSON null is accepted only where v points to a pointer or an interface
// (optional values, arbitrary JSON): encoding/json would otherwise leave a
// string, bool, slice or map target silently unchanged.
func (o *object) get(name string, required bool, v any) error {
	raw, err := o.raw(name, required)
	if err != nil || raw == nil {
		return err
	}
	if o.isNull(name) {
		switch reflect.TypeOf(v).Elem().Kind() {
		case reflect.Pointer, reflect.Interface:
		default:
			return &DecodeError{Field: field(o.path, name), Err: fmt.Errorf("%w: got JSON null", ErrWrongType)}
		}
	}
	if err := unmarshalValue(raw, v); err != nil {
		return &DecodeError{Field: field(o.path, name), Err: err}
	}
	return nil
}

// done reports the first field that was never read.
func (o *object) done() error {
	var unknown []string
	for k := range o.fields {
		if !o.seen[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return &DecodeError{Field: field(o.path, unknown[0]), Err: ErrUnknownField}
}

// unmarshalValue decodes JSON keeping numbers as json.Number. Strings,
// booleans, arrays and objects of raw members take a fast path.
func unmarshalValue(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 {
		switch x := v.(type) {
		case *string:
			if data[0] == '"' {
				s, err := unquote(data)
				*x = s
				return err
			}
		case *bool:
			switch string(data) {
			case "true", "false":
				*x = data[0] == 't'
				return nil
			}
		case *[]json.RawMessage:
			if data[0] == '[' {
				a, err := splitArray(data)
				*x = a
				return err
			}
		case *map[string]json.RawMessage:
			if data[0] == '{' {
				members, err := splitObject(data)
				if err != nil {
					return err
				}
				m := make(map[string]json.RawMessage, len(members))
				for _, mb := range members {
					m[mb.key] = mb.val // the last one wins, as in encoding/json
				}
				*x = m
				return nil
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("%w: got JSON %s, want %s", ErrWrongType, ute.Value, jsonTypeName(ute.Type))
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// jsonTypeName names the JSON type that decodes into t.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

// DecodeOperator decodes an operator object. Aliases are accepted; an empty
// object {} decodes as nil (match all), as does null.
func DecodeOperator(data []byte) (*Operator, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	return decodeOperator("", data, true)
}

func decodeOperator(path string, data json.RawMessage, allowEmpty bool) (*Operator, error) {
	t := bytes.TrimSpace(data)
	if allowEmpty && (bytes.Equal(t, []byte("null")) || len(t) == 0) {
		return nil, nil
	}
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	if allowEmpty && len(o.fields) == 0 {
		return nil, nil
	}
	var name string
	if err := o.get("type", true, &name); err != nil {
		return nil, err
	}
	typ, ok := ParseOpType(name)
	if !ok {
		return nil, &DecodeError{Field: field(path, "type"), Err: fmt.Errorf("%w: unknown operator %q", ErrInvalidOperator, name)}
	}
	op := &Operator{Type: typ}
	switch typ {
	case OpAnd, OpOr:
		var raws []json.RawMessage
		if err := o.get("operators", true, &raws); err != nil {
			return nil, err
		}
		if raws == nil {
			return nil, &DecodeError{Field: field(path, "operators"), Err: fmt.Errorf("%w: expected an array", ErrWrongType)}
		}
		op.Operators = make([]*Operator, 0, len(raws))
		for i, r := range raws {
			child, err := decodeOperator(fmt.Sprintf("%s[%d]", field(path, "operators"), i), r, false)
			if err != nil {
				return nil, err
			}
			op.Operators = append(op.Operators, child)
		}
	case OpNot:
		raw, err := o.raw("operator", true)
		if err != nil {
			return nil, err
		}
		if op.Operator, err = decodeOperator(field(path, "operator"), raw, false); err != nil {
			return nil, err
		}
	case OpRegex:
		if err := o.get("regex", true, &op.Regex); err != nil {
			return nil, err
		}
		if err := o.get("target", true, &op.Target); err != nil {
			return nil, err
		}
	default:
		if err := o.get("first", true, &op.First); err != nil {
			return nil, err
		}
		if err := o.get("second", true, &op.Second); err != nil {
			return nil, err
		}
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return op, nil
}

// MarshalJSON writes the operator with its canonical type name.
func (o *Operator) MarshalJSON() ([]byte, error) {
	switch o.Type {
	case OpAnd, OpOr:
		ops := o.Operators
		if ops == nil {
			ops = []*Operator{}
		}
		return json.Marshal(struct {
			Type      OpType      `json:"type"`
			Operators []*Operator `json:"operators"`
		}{o.Type, ops})
	case OpNot:
		return json.Marshal(struct {
			Type     OpType    `json:"type"`
			Operator *Operator `json:"operator"`
		}{o.Type, o.Operator})
	case OpRegex:
		return json.Marshal(struct {
			Type   OpType `json:"type"`
			Regex  string `json:"regex"`
			Target string `json:"target"`
		}{o.Type, o.Regex, o.Target})
	}
	return json.Marshal(struct {
		Type   OpType `json:"type"`
		First  any    `json:"first"`
		Second any    `json:"second"`
	}{o.Type, o.First, o.Second})
}

// Form selects the JSON shape of rules: the API form tags extractor regexes
// with a type; the export form names the variant by its key.
type Form uint8

// The rule forms.
const (
	FormAPI Form = iota + 1
	FormExport
)

// DecodeRule decodes a rule in either form (docs/decisions.md decision 13): the
// extractor regex may carry a type tag or not, and operator aliases are accepted.
// The name is optional and defaults to "" as in Tornado's rule files (v1 rule
// files carry none: their name came from the file name); [Validate] then
// rejects the empty name, so a tree never holds an unnamed rule.
func DecodeRule(data []byte) (*Rule, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	return decodeRule("", data)
}

func decodeRule(path string, data json.RawMessage) (*Rule, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	r := &Rule{}
	if err := o.get("name", false, &r.Name); err != nil {
		return nil, err
	}
	if err := o.get("description", false, &r.Description); err != nil {
		return nil, err
	}
	if err := o.get("continue", true, &r.Continue); err != nil {
		return nil, err
	}
	if err := o.get("active", true, &r.Active); err != nil {
		return nil, err
	}
	craw, err := o.raw("constraint", true)
	if err != nil {
		return nil, err
	}
	c, err := parseObject(field(path, "constraint"), craw)
	if err != nil {
		return nil, err
	}
	wraw, _ := c.raw("WHERE", false)
	if wraw != nil {
		if r.Where, err = decodeOperator(field(c.path, "WHERE"), wraw, true); err != nil {
			return nil, err
		}
	}
	withRaw, err := c.raw("WITH", true)
	if err != nil {
		return nil, err
	}
	var with map[string]json.RawMessage
	if err := unmarshalValue(withRaw, &with); err != nil || with == nil {
		if err == nil {
			err = fmt.Errorf("%w: expected an object", ErrWrongType)
		}
		return nil, &DecodeError{Field: field(c.path, "WITH"), Err: err}
	}
	r.With = make(map[string]*Extractor, len(with))
	for _, name := range slices.Sorted(mapsKeys(with)) {
		ex, err := decodeExtractor(field(field(c.path, "WITH"), name), with[name])
		if err != nil {
			return nil, err
		}
		r.With[name] = ex
	}
	if err := c.done(); err != nil {
		return nil, err
	}
	var actions []json.RawMessage
	if err := o.get("actions", true, &actions); err != nil {
		return nil, err
	}
	if actions == nil {
		return nil, &DecodeError{Field: field(path, "actions"), Err: fmt.Errorf("%w: expected an array", ErrWrongType)}
	}
	r.Actions = make([]*Action, 0, len(actions))
	for i, a := range actions {
		act, err := decodeAction(fmt.Sprintf("%s[%d]", field(path, "actions"), i), a)
		if err != nil {
			return nil, err
		}
		r.Actions = append(r.Actions, act)
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return r, nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func decodeAction(path string, data json.RawMessage) (*Action, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	a := &Action{}
	if err := o.get("id", true, &a.ID); err != nil {
		return nil, err
	}
	var payload any
	if err := o.get("payload", true, &payload); err != nil {
		return nil, err
	}
	m, ok := payload.(map[string]any)
	if !ok {
		return nil, &DecodeError{Field: field(path, "payload"), Err: fmt.Errorf("%w: expected an object", ErrWrongType)}
	}
	a.Payload = m
	if err := o.done(); err != nil {
		return nil, err
	}
	return a, nil
}

func decodeExtractor(path string, data json.RawMessage) (*Extractor, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	ex := &Extractor{}
	if err := o.get("from", true, &ex.From); err != nil {
		return nil, err
	}
	rraw, err := o.raw("regex", true)
	if err != nil {
		return nil, err
	}
	if ex.Regex, err = decodeExtractorRegex(field(path, "regex"), rraw); err != nil {
		return nil, err
	}
	var mods []json.RawMessage
	if err := o.get("modifiers_post", false, &mods); err != nil {
		return nil, err
	}
	for i, m := range mods {
		mod, err := decodeModifier(fmt.Sprintf("%s[%d]", field(path, "modifiers_post"), i), m)
		if err != nil {
			return nil, err
		}
		ex.Modifiers = append(ex.Modifiers, mod)
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return ex, nil
}

var regexKindByTag = map[string]RegexKind{"Regex": RegexIndexed, "RegexNamedGroups": RegexNamed, "KeyRegex": RegexSingleKey}

func decodeExtractorRegex(path string, data json.RawMessage) (ExtractorRegex, error) {
	var re ExtractorRegex
	o, err := parseObject(path, data)
	if err != nil {
		return re, err
	}
	var byKey []RegexKind
	for key, kind := range map[string]RegexKind{"match": RegexIndexed, "named_match": RegexNamed, "single_key_match": RegexSingleKey} {
		if o.has(key) {
			byKey = append(byKey, kind)
		}
	}
	var tag string
	if err := o.get("type", false, &tag); err != nil {
		return re, err
	}
	switch {
	case len(byKey) > 1:
		return re, &DecodeError{Field: path, Err: fmt.Errorf("%w: only one of match, named_match and single_key_match may be given", ErrInvalidValue)}
	case o.has("type"):
		kind, ok := regexKindByTag[tag]
		if !ok {
			return re, &DecodeError{Field: field(path, "type"), Err: fmt.Errorf("%w: unknown regex type %q (want Regex, RegexNamedGroups or KeyRegex)", ErrInvalidValue, tag)}
		}
		re.Kind = kind
	case len(byKey) == 1:
		re.Kind = byKey[0]
	default:
		return re, &DecodeError{Field: path, Err: fmt.Errorf("%w: one of match, named_match or single_key_match", ErrMissingField)}
	}
	switch re.Kind {
	case RegexIndexed:
		if err := o.get("match", true, &re.Pattern); err != nil {
			return re, err
		}
		if err := o.get("group_match_idx", false, &re.GroupMatchIdx); err != nil {
			return re, err
		}
		if re.GroupMatchIdx != nil && *re.GroupMatchIdx < 0 {
			return re, &DecodeError{Field: field(path, "group_match_idx"), Err: fmt.Errorf("%w: must not be negative", ErrInvalidValue)}
		}
		var all *bool
		if err := o.get("all_matches", false, &all); err != nil {
			return re, err
		}
		re.AllMatches = all != nil && *all
	case RegexNamed:
		if err := o.get("named_match", true, &re.Pattern); err != nil {
			return re, err
		}
		var all *bool
		if err := o.get("all_matches", false, &all); err != nil {
			return re, err
		}
		re.AllMatches = all != nil && *all
	case RegexSingleKey:
		if err := o.get("single_key_match", true, &re.Pattern); err != nil {
			return re, err
		}
	}
	return re, o.done()
}

func decodeModifier(path string, data json.RawMessage) (*Modifier, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	m := &Modifier{}
	if err := o.get("type", true, &m.Type); err != nil {
		return nil, err
	}
	switch m.Type {
	case ModLowercase, ModTrim, ModToNumber:
	case ModMap:
		if err := o.get("mapping", true, &m.Mapping); err != nil {
			return nil, err
		}
		if m.Mapping == nil {
			return nil, &DecodeError{Field: field(path, "mapping"), Err: fmt.Errorf("%w: expected an object", ErrWrongType)}
		}
		if err := o.get("default_value", false, &m.DefaultValue); err != nil {
			return nil, err
		}
	case ModReplaceAll:
		if err := o.get("find", true, &m.Find); err != nil {
			return nil, err
		}
		if err := o.get("replace", true, &m.Replace); err != nil {
			return nil, err
		}
		var isRegex *bool
		if err := o.get("is_regex", false, &isRegex); err != nil {
			return nil, err
		}
		m.IsRegex = isRegex != nil && *isRegex
	case ModDateAndTime:
		if err := o.get("timezone", true, &m.Timezone); err != nil {
			return nil, err
		}
	default:
		return nil, &DecodeError{Field: field(path, "type"), Err: fmt.Errorf("%w: unknown modifier %q (want Lowercase, Trim, ToNumber, Map, ReplaceAll or DateAndTime)", ErrInvalidValue, m.Type)}
	}
	return m, o.done()
}

// MarshalJSON writes the modifier with the fields of its type.
func (m *Modifier) MarshalJSON() ([]byte, error) {
	switch m.Type {
	case ModMap:
		return json.Marshal(struct {
			Type         ModifierType      `json:"type"`
			Mapping      map[string]string `json:"mapping"`
			DefaultValue *string           `json:"default_value"`
		}{m.Type, m.Mapping, m.DefaultValue})
	case ModReplaceAll:
		return json.Marshal(struct {
			Type    ModifierType `json:"type"`
			Find    string       `json:"find"`
			Replace string       `json:"replace"`
			IsRegex bool         `json:"is_regex"`
		}{m.Type, m.Find, m.Replace, m.IsRegex})
	case ModDateAndTime:
		return json.Marshal(struct {
			Type     ModifierType `json:"type"`
			Timezone string       `json:"timezone"`
		}{m.Type, m.Timezone})
	}
	return json.Marshal(struct {
		Type ModifierType `json:"type"`
	}{m.Type})
}

// ruleJSON is the output shape of a rule in either form.
type ruleJSON struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Continue    bool           `json:"continue"`
	Active      bool           `json:"active"`
	Constraint  constraintJSON `json:"constraint"`
	Actions     []*Action      `json:"actions"`
}

type constraintJSON struct {
	Where *Operator                `json:"WHERE"`
	With  map[string]extractorJSON `json:"WITH"`
}

type extractorJSON struct {
	From      string      `json:"from"`
	Regex     any         `json:"regex"`
	Modifiers []*Modifier `json:"modifiers_post"`
}

type regexIndexedJSON struct {
	Type          string `json:"type,omitempty"`
	Match         string `json:"match"`
	GroupMatchIdx *int   `json:"group_match_idx"`
	AllMatches    bool   `json:"all_matches"`
}

type regexNamedJSON struct {
	Type       string `json:"type,omitempty"`
	NamedMatch string `json:"named_match"`
	AllMatches bool   `json:"all_matches"`
}

type regexKeyJSON struct {
	Type           string `json:"type,omitempty"`
	SingleKeyMatch string `json:"single_key_match"`
}

func (r *Rule) toJSON(form Form) ruleJSON {
	out := ruleJSON{
		Name: r.Name, Description: r.Description, Continue: r.Continue, Active: r.Active,
		Constraint: constraintJSON{Where: r.Where, With: make(map[string]extractorJSON, len(r.With))},
		Actions:    r.Actions,
	}
	if out.Actions == nil {
		out.Actions = []*Action{}
	}
	for name, ex := range r.With {
		tag := ""
		if form == FormAPI {
			tag = ex.Regex.Kind.String()
		}
		var re any
		switch ex.Regex.Kind {
		case RegexNamed:
			re = regexNamedJSON{tag, ex.Regex.Pattern, ex.Regex.AllMatches}
		case RegexSingleKey:
			re = regexKeyJSON{tag, ex.Regex.Pattern}
		default:
			re = regexIndexedJSON{tag, ex.Regex.Pattern, ex.Regex.GroupMatchIdx, ex.Regex.AllMatches}
		}
		mods := ex.Modifiers
		if mods == nil {
			mods = []*Modifier{}
		}
		out.Constraint.With[name] = extractorJSON{From: ex.From, Regex: re, Modifiers: mods}
	}
	return out
}

// EncodeRule returns the JSON of a rule in the given form. Unlike
// json.Marshal it leaves <, > and & unescaped, so that patterns such as
// (?P<name>...) stay readable.
func EncodeRule(r *Rule, form Form) ([]byte, error) {
	b, err := json.Marshal(r.toJSON(form))
	if err != nil {
		return nil, err
	}
	return unescapeHTML(b), nil
}

// MarshalJSON writes the rule in the API form (regex with a type tag).
func (r *Rule) MarshalJSON() ([]byte, error) {
	return json.Marshal(r.toJSON(FormAPI))
}

// MarshalJSON writes {id, payload}.
func (a *Action) MarshalJSON() ([]byte, error) {
	p := a.Payload
	if p == nil {
		p = map[string]any{}
	}
	return json.Marshal(struct {
		ID      string         `json:"id"`
		Payload map[string]any `json:"payload"`
	}{a.ID, p})
}

// kindByName maps the API's node type names to kinds.
var kindByName = map[string]Kind{"Filter": KindFilter, "Iterator": KindIterator, "Ruleset": KindRuleset}

// DecodeNodeEdit decodes the NodeDetails body of node create and edit
// requests: {type, name, description, active, filter} for filters,
// {type, name, description, active, target} for iterators, and {type, name}
// for rulesets (a rules field is accepted and ignored: rules are edited
// through the rule endpoints). The node has no children or rules.
func DecodeNodeEdit(data []byte) (*Node, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	o, err := parseObject("", data)
	if err != nil {
		return nil, err
	}
	var typ string
	if err := o.get("type", true, &typ); err != nil {
		return nil, err
	}
	kind, ok := kindByName[typ]
	if !ok {
		return nil, &DecodeError{Field: "type", Err: fmt.Errorf("%w: unknown node type %q (want Filter, Iterator or Ruleset)", ErrInvalidValue, typ)}
	}
	n := &Node{Kind: kind}
	if err := o.get("name", true, &n.Name); err != nil {
		return nil, err
	}
	switch kind {
	case KindFilter, KindIterator:
		if err := o.get("description", true, &n.Description); err != nil {
			return nil, err
		}
		if err := o.get("active", true, &n.Active); err != nil {
			return nil, err
		}
		if kind == KindFilter {
			raw, _ := o.raw("filter", false)
			if n.Filter, err = decodeOperator("filter", raw, true); err != nil {
				return nil, err
			}
		} else if err := o.get("target", true, &n.Target); err != nil {
			return nil, err
		}
	case KindRuleset:
		o.seen["rules"] = true
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return n, nil
}

// RuleDetails is the summary of a rule in NodeDetails of a ruleset.
type RuleDetails struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Continue    bool     `json:"continue"`
	Active      bool     `json:"active"`
	Actions     []string `json:"actions"`
}

// Details returns the rule's summary.
func (r *Rule) Details() RuleDetails {
	d := RuleDetails{Name: r.Name, Description: r.Description, Continue: r.Continue, Active: r.Active, Actions: make([]string, 0, len(r.Actions))}
	for _, a := range r.Actions {
		d.Actions = append(d.Actions, a.ID)
	}
	return d
}

// NodeDetails is the API view of one node (without its children).
type NodeDetails struct {
	Node *Node
}

// MarshalJSON writes the NodeDetails form of the spec.
func (d NodeDetails) MarshalJSON() ([]byte, error) {
	n := d.Node
	switch n.Kind {
	case KindFilter:
		return json.Marshal(struct {
			Type        string    `json:"type"`
			Name        string    `json:"name"`
			Description string    `json:"description"`
			Active      bool      `json:"active"`
			Filter      *Operator `json:"filter"`
		}{"Filter", n.Name, n.Description, n.Active, n.Filter})
	case KindIterator:
		return json.Marshal(struct {
			Type        string `json:"type"`
			Name        string `json:"name"`
			Description string `json:"description"`
			Active      bool   `json:"active"`
			Target      string `json:"target"`
		}{"Iterator", n.Name, n.Description, n.Active, n.Target})
	}
	rules := make([]RuleDetails, 0, len(n.Rules))
	for _, r := range n.Rules {
		rules = append(rules, r.Details())
	}
	return json.Marshal(struct {
		Type  string        `json:"type"`
		Name  string        `json:"name"`
		Rules []RuleDetails `json:"rules"`
	}{"Ruleset", n.Name, rules})
}

// NodeInfo is the summary of a node in children listings.
type NodeInfo struct {
	Type                string  `json:"type"`
	Name                string  `json:"name"`
	RulesCount          int     `json:"rules_count"`
	Description         *string `json:"description,omitempty"`
	ChildrenCount       *int    `json:"children_count,omitempty"`
	HasIteratorAncestor *bool   `json:"has_iterator_ancestor,omitempty"`
	Active              *bool   `json:"active,omitempty"`
}

// Info returns the node's summary. underIterator tells whether an iterator
// is among the node's ancestors.
func (n *Node) Info(underIterator bool) NodeInfo {
	info := NodeInfo{Type: n.Kind.String(), Name: n.Name, RulesCount: n.Count().Rules}
	if n.Kind == KindRuleset {
		return info
	}
	desc, children, active := n.Description, len(n.Children), n.Active
	info.Description, info.ChildrenCount, info.Active = &desc, &children, &active
	if n.Kind == KindFilter {
		info.HasIteratorAncestor = &underIterator
	}
	return info
}

// ExportVersion is the version written in export files; "1.0" and "1.1" are read.
const ExportVersion = "1.1"

// Export is the export file of a subtree: {"version": "1.1", "<Kind>": {...}}.
type Export struct {
	Version string
	Node    *Node
}

// DecodeExport decodes an export file. Decoding is strict: unknown fields are errors.
func DecodeExport(data []byte) (*Export, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	o, err := parseObject("", data)
	if err != nil {
		return nil, err
	}
	ex := &Export{}
	if err := o.get("version", true, &ex.Version); err != nil {
		return nil, err
	}
	if ex.Version != "1.0" && ex.Version != "1.1" {
		return nil, &DecodeError{Field: "version", Err: fmt.Errorf("%w: unsupported version %q (want 1.0 or 1.1)", ErrInvalidValue, ex.Version)}
	}
	if ex.Node, err = decodeExportNode("", o); err != nil {
		return nil, err
	}
	return ex, nil
}

// DecodeExportNode decodes one node of the export form: {"Filter": {...}}.
func DecodeExportNode(data []byte) (*Node, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	o, err := parseObject("", data)
	if err != nil {
		return nil, err
	}
	return decodeExportNode("", o)
}

// decodeExportNode reads the single kind key of o (other keys already marked
// seen). Error fields are paths inside the document, such as
// Filter.nodes[0].Ruleset.rules[1].constraint.WITH.x.regex.
func decodeExportNode(path string, o *object) (*Node, error) {
	var kind Kind
	var raw json.RawMessage
	for _, k := range slices.Sorted(mapsKeys(o.fields)) {
		if o.seen[k] {
			continue
		}
		kd, ok := kindByName[k]
		if !ok {
			return nil, &DecodeError{Field: field(path, k), Err: fmt.Errorf("%w: a node is one of Filter, Iterator, Ruleset", ErrUnknownField)}
		}
		if raw != nil {
			return nil, &DecodeError{Field: path, Err: fmt.Errorf("%w: a node has exactly one of Filter, Iterator, Ruleset", ErrInvalidValue)}
		}
		kind, raw = kd, o.fields[k]
	}
	if raw == nil {
		return nil, &DecodeError{Field: path, Err: fmt.Errorf("%w: one of Filter, Iterator, Ruleset", ErrMissingField)}
	}
	npath := field(path, kind.String())
	b, err := parseObject(npath, raw)
	if err != nil {
		return nil, err
	}
	n := &Node{Kind: kind}
	if err := b.get("name", true, &n.Name); err != nil {
		return nil, err
	}
	switch kind {
	case KindRuleset:
		var rules []json.RawMessage
		if err := b.get("rules", true, &rules); err != nil {
			return nil, err
		}
		for i, r := range rules {
			rule, err := decodeRule(fmt.Sprintf("%s.rules[%d]", npath, i), r)
			if err != nil {
				return nil, err
			}
			n.Rules = append(n.Rules, rule)
		}
	default:
		key := "filter"
		if kind == KindIterator {
			key = "iterator"
		}
		sraw, err := b.raw(key, true)
		if err != nil {
			return nil, err
		}
		s, err := parseObject(field(npath, key), sraw)
		if err != nil {
			return nil, err
		}
		if err := s.get("description", true, &n.Description); err != nil {
			return nil, err
		}
		if err := s.get("active", true, &n.Active); err != nil {
			return nil, err
		}
		if kind == KindFilter {
			fraw, err := s.raw("filter", true)
			if err != nil {
				return nil, err
			}
			if n.Filter, err = decodeOperator(field(s.path, "filter"), fraw, true); err != nil {
				return nil, err
			}
		} else if err := s.get("target", true, &n.Target); err != nil {
			return nil, err
		}
		if err := s.done(); err != nil {
			return nil, err
		}
		var nodes []json.RawMessage
		if err := b.get("nodes", true, &nodes); err != nil {
			return nil, err
		}
		for i, c := range nodes {
			cpath := fmt.Sprintf("%s.nodes[%d]", npath, i)
			co, err := parseObject(cpath, c)
			if err != nil {
				return nil, err
			}
			child, err := decodeExportNode(cpath, co)
			if err != nil {
				return nil, err
			}
			n.Children = append(n.Children, child)
		}
	}
	if err := b.done(); err != nil {
		return nil, err
	}
	return n, nil
}

// exportNodeJSON writes one node of the export form.
type exportNodeJSON struct{ n *Node }

// The export form of filters and iterators, fields in the order of
// Tornado's export files (docs/rules.md, "Export files").
type (
	exportFilterJSON struct {
		Name   string             `json:"name"`
		Filter filterSettingsJSON `json:"filter"`
		Nodes  []exportNodeJSON   `json:"nodes"`
	}
	filterSettingsJSON struct {
		Description string `json:"description"`
		Active      bool   `json:"active"`
		Filter      any    `json:"filter"`
	}
	exportIteratorJSON struct {
		Name     string               `json:"name"`
		Iterator iteratorSettingsJSON `json:"iterator"`
		Nodes    []exportNodeJSON     `json:"nodes"`
	}
	iteratorSettingsJSON struct {
		Description string `json:"description"`
		Active      bool   `json:"active"`
		Target      string `json:"target"`
	}
)

func (e exportNodeJSON) MarshalJSON() ([]byte, error) {
	n := e.n
	if n == nil {
		return nil, errors.New("export: missing node")
	}
	var body any
	switch n.Kind {
	case KindRuleset:
		rules := make([]ruleJSON, 0, len(n.Rules))
		for _, r := range n.Rules {
			rules = append(rules, r.toJSON(FormExport))
		}
		body = struct {
			Name  string     `json:"name"`
			Rules []ruleJSON `json:"rules"`
		}{n.Name, rules}
	default:
		nodes := make([]exportNodeJSON, 0, len(n.Children))
		for _, c := range n.Children {
			nodes = append(nodes, exportNodeJSON{c})
		}
		if n.Kind == KindFilter {
			var filter any = struct{}{} // match all: {} in the export form
			if n.Filter != nil {
				filter = n.Filter
			}
			body = exportFilterJSON{n.Name, filterSettingsJSON{n.Description, n.Active, filter}, nodes}
		} else {
			body = exportIteratorJSON{n.Name, iteratorSettingsJSON{n.Description, n.Active, n.Target}, nodes}
		}
	}
	return json.Marshal(map[string]any{n.Kind.String(): body})
}

// MarshalJSON writes the export file.
func (e *Export) MarshalJSON() ([]byte, error) {
	node, err := exportNodeJSON{e.Node}.MarshalJSON()
	if err != nil {
		return nil, err
	}
	v := e.Version
	if v == "" {
		v = ExportVersion
	}
	var buf bytes.Buffer
	buf.WriteString(`{"version":`)
	vb, _ := json.Marshal(v)
	buf.Write(vb)
	buf.WriteByte(',')
	buf.Write(node[1:])
	return buf.Bytes(), nil
}

// EncodeExport returns the indented export file of the subtree at n.
// Like EncodeRule, it leaves <, > and & unescaped.
func EncodeExport(n *Node) ([]byte, error) {
	b, err := json.Marshal(&Export{Version: ExportVersion, Node: n})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, unescapeHTML(b), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// unescapeHTML undoes encoding/json's escaping of <, > and & (\u003c,
// \u003e, \u0026) in JSON text. Every backslash in JSON text starts an
// escape sequence inside a string, so other escapes are copied whole.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out = append(out, c)
		if i+1 < len(b) {
			out, i = append(out, b[i+1]), i+1
		}
	}
	return out
}
