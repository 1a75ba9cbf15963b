package ruletest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

// File is a decoded test file.
type File struct {
	// Name is the file's name, as errors and results write it.
	Name  string
	Cases []*Case
}

// Case is one test case: an event and what must happen to it.
type Case struct {
	Name        string
	Description string
	// Event is the event sent through the tree.
	Event *tree.Event
	// Match and NoMatch are the rules that must, and must not, match.
	Match, NoMatch []Path
	// Variables are, by rule, the variables the rule must have extracted.
	Variables []VariablesExpectation
	// Actions are, by rule, the actions the rule must have resolved.
	Actions []ActionsExpectation
}

// VariablesExpectation is what a rule must have extracted: at least these
// variables, with these values.
type VariablesExpectation struct {
	Rule Path
	// Values maps variable names to JSON values (json.Number for numbers).
	Values map[string]any
}

// ActionsExpectation is what a rule must have resolved: for each action
// listed, a distinct action with its id whose payload holds its fields.
type ActionsExpectation struct {
	Rule    Path
	Actions []ExpectedAction
}

// ExpectedAction is an action a rule must resolve.
type ExpectedAction struct {
	ID string
	// Payload holds the fields the resolved payload must have; nil checks
	// the id only.
	Payload map[string]any
}

// Path names a rule: node names from the tree's top node, then the rule's
// name; a node's name may carry an iteration ("alerts[2]").
type Path struct {
	raw  string
	segs []segment
}

type segment struct {
	name      string
	iteration string
	// iterated says the segment names an iteration (name[iteration]).
	iterated bool
}

// String returns the path as written.
func (p Path) String() string { return p.raw }

// names returns the path's names without iterations: the nodes and the
// rule.
func (p Path) names() []string {
	out := make([]string, len(p.segs))
	for i, s := range p.segs {
		out[i] = s.name
	}
	return out
}

// ParsePath parses a rule path: at least a node and a rule, "/"-separated
// names (letters, digits, underscores), each node optionally followed by
// an iteration in brackets.
func ParsePath(s string) (Path, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 {
		return Path{}, fmt.Errorf("rule path %q: want the node names from the top node, then the rule name, joined by \"/\" (e.g. root/alerts/notify)", s)
	}
	p := Path{raw: s, segs: make([]segment, len(parts))}
	for i, part := range parts {
		seg := segment{name: part}
		if open := strings.IndexByte(part, '['); open >= 0 && i < len(parts)-1 {
			if !strings.HasSuffix(part, "]") || open == len(part)-2 {
				return Path{}, fmt.Errorf("rule path %q: %q: an iteration is written name[index or key]", s, part)
			}
			seg = segment{name: part[:open], iteration: part[open+1 : len(part)-1], iterated: true}
			if strings.ContainsAny(seg.iteration, "[]") {
				return Path{}, fmt.Errorf("rule path %q: %q: an iteration is written name[index or key], with [ and ] escaped as in a URL query", s, part)
			}
		}
		if !config.ValidName(seg.name) {
			return Path{}, fmt.Errorf("rule path %q: %q is not a node or rule name (letters, digits and _)", s, seg.name)
		}
		p.segs[i] = seg
	}
	return p, nil
}

// DecodeError is an error in a test file: the file, the place in it (such
// as cases[2].match[0]) and the problem.
type DecodeError struct {
	File  string
	Field string
	Err   error
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.File, e.Field, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrUnknownField classifies fields a test file may not hold.
var ErrUnknownField = errors.New("unknown field")

// The fields of a file, of a case and of an action, for error messages.
var (
	fileFields   = []string{"cases"}
	caseFields   = []string{"name", "description", "event", "match", "no_match", "variables", "actions"}
	actionFields = []string{"id", "payload"}
)

// Decode decodes a test file; name is the file's name, which errors and
// results carry. Decoding is strict: see the package documentation.
func Decode(name string, data []byte) (*File, error) {
	fail := func(field string, err error) error { return &DecodeError{File: name, Field: field, Err: err} }
	var raw struct {
		Cases []json.RawMessage `json:"cases"`
	}
	if err := strictDecode(data, &raw, fileFields); err != nil {
		return nil, fail("", err)
	}
	if len(raw.Cases) == 0 {
		return nil, fail("cases", errors.New(`no cases: a test file is {"cases": [{"name": ..., "event": ..., "match": [...]}, ...]}`))
	}
	f := &File{Name: name}
	seen := map[string]int{}
	for i, rc := range raw.Cases {
		c, err := decodeCase(rc)
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return nil, fail(fmt.Sprintf("cases[%d]%s", i, fe.field), fe.err)
			}
			return nil, fail(fmt.Sprintf("cases[%d]", i), err)
		}
		if j, dup := seen[c.Name]; dup {
			return nil, fail(fmt.Sprintf("cases[%d].name", i), fmt.Errorf("%q is also the name of cases[%d]", c.Name, j))
		}
		seen[c.Name] = i
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

// fieldError is an error at a field of a case, written from the case
// (".match[0]").
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

func decodeCase(data json.RawMessage) (*Case, error) {
	var raw struct {
		Name        *string                               `json:"name"`
		Description string                                `json:"description"`
		Event       json.RawMessage                       `json:"event"`
		Match       []string                              `json:"match"`
		NoMatch     []string                              `json:"no_match"`
		Variables   map[string]map[string]json.RawMessage `json:"variables"`
		Actions     map[string][]json.RawMessage          `json:"actions"`
	}
	if err := strictDecode(data, &raw, caseFields); err != nil {
		// Name the case when its name can be read.
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(data, &named) == nil && strings.TrimSpace(named.Name) != "" {
			return nil, &fieldError{fmt.Sprintf(" (%q)", named.Name), err}
		}
		return nil, err
	}
	if raw.Name == nil || strings.TrimSpace(*raw.Name) == "" {
		return nil, &fieldError{".name", errors.New("missing: every case has a name")}
	}
	at := func(field string, err error) error {
		return &fieldError{fmt.Sprintf(" (%q)%s", *raw.Name, field), err}
	}
	c := &Case{Name: *raw.Name, Description: raw.Description}
	if len(raw.Event) == 0 || string(raw.Event) == "null" {
		return nil, at(".event", errors.New(`missing: every case has an event ({"type": ..., "created_ms": ..., "payload": {...}})`))
	}
	ev, err := tree.DecodeEvent(raw.Event)
	if err != nil {
		return nil, at(".event", err)
	}
	c.Event = ev
	paths := func(field string, in []string) ([]Path, error) {
		out := make([]Path, 0, len(in))
		for i, s := range in {
			p, err := ParsePath(s)
			if err != nil {
				return nil, at(fmt.Sprintf(".%s[%d]", field, i), err)
			}
			out = append(out, p)
		}
		return out, nil
	}
	if c.Match, err = paths("match", raw.Match); err != nil {
		return nil, err
	}
	if c.NoMatch, err = paths("no_match", raw.NoMatch); err != nil {
		return nil, err
	}
	for _, m := range c.Match {
		if slices.ContainsFunc(c.NoMatch, func(n Path) bool { return n.raw == m.raw }) {
			return nil, at(".no_match", fmt.Errorf("%s is also in match", m))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(raw.Variables)) {
		field := ".variables[" + strconv.Quote(key) + "]"
		p, err := ParsePath(key)
		if err != nil {
			return nil, at(field, err)
		}
		if len(raw.Variables[key]) == 0 {
			return nil, at(field, errors.New("no variables: list the variables the rule must extract, or leave the rule out"))
		}
		ve := VariablesExpectation{Rule: p, Values: map[string]any{}}
		for _, name := range slices.Sorted(maps.Keys(raw.Variables[key])) {
			v, err := decodeValue(raw.Variables[key][name])
			if err != nil {
				return nil, at(field+"."+name, err)
			}
			ve.Values[name] = v
		}
		c.Variables = append(c.Variables, ve)
	}
	for _, key := range slices.Sorted(maps.Keys(raw.Actions)) {
		field := ".actions[" + strconv.Quote(key) + "]"
		p, err := ParsePath(key)
		if err != nil {
			return nil, at(field, err)
		}
		if len(raw.Actions[key]) == 0 {
			return nil, at(field, errors.New("no actions: list the actions the rule must resolve, or leave the rule out"))
		}
		ae := ActionsExpectation{Rule: p}
		for i, ra := range raw.Actions[key] {
			a, err := decodeAction(ra)
			if err != nil {
				return nil, at(fmt.Sprintf("%s[%d]", field, i), err)
			}
			ae.Actions = append(ae.Actions, a)
		}
		c.Actions = append(c.Actions, ae)
	}
	if len(c.Match)+len(c.NoMatch)+len(c.Variables)+len(c.Actions) == 0 {
		return nil, at("", errors.New("no expectations: give at least one of match, no_match, variables, actions"))
	}
	return c, nil
}

func decodeAction(data json.RawMessage) (ExpectedAction, error) {
	var raw struct {
		ID      string          `json:"id"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := strictDecode(data, &raw, actionFields); err != nil {
		return ExpectedAction{}, err
	}
	if raw.ID == "" {
		return ExpectedAction{}, errors.New("id: missing: every expected action has the id of an action")
	}
	a := ExpectedAction{ID: raw.ID}
	if len(raw.Payload) > 0 && string(raw.Payload) != "null" {
		v, err := decodeValue(raw.Payload)
		if err != nil {
			return ExpectedAction{}, fmt.Errorf("payload: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return ExpectedAction{}, errors.New("payload: not an object")
		}
		a.Payload = m
	}
	return a, nil
}

// strictDecode decodes one JSON value into v, refusing unknown fields
// (named with the known ones) and trailing data.
func strictDecode(data []byte, v any, known []string) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("%w %s (known fields: %s)", ErrUnknownField, f, strings.Join(known, ", "))
		}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return fmt.Errorf("%s: a JSON %s where %s is expected", te.Field, te.Value, jsonKind(te.Type))
		}
		return stripJSONPrefix(err)
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// jsonKind names the JSON value a Go type decodes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a " + t.String()
}

// stripJSONPrefix drops encoding/json's "json: " from an error's text,
// keeping the error for errors.Is.
func stripJSONPrefix(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "json: "); ok {
		return &wrapped{msg: s, err: err}
	}
	return err
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// decodeValue decodes a JSON value with numbers as json.Number.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, stripJSONPrefix(err)
	}
	return v, nil
}
