package ruletest

import (
	"errors"
	"strings"
	"testing"
)

// TestDecode_errors checks that every malformed file is refused with an
// error naming the file, the place in it and the problem.
func TestDecode_errors(t *testing.T) {
	t.Parallel()
	const ev = `{"type": "t", "created_ms": 1, "payload": {}}`
	for _, tc := range []struct {
		name, file, want string
	}{
		{"not JSON", `{"cases": [`, `bad.json: unexpected EOF`},
		{"not an object", `[]`, `bad.json: not a JSON object`},
		{"unknown top-level field", `{"cases": [], "tree": "x"}`, `bad.json: unknown field "tree" (known fields: cases)`},
		{"no cases", `{"cases": []}`, `bad.json: cases: no cases`},
		{"unknown case field", `{"cases": [{"name": "a", "event": ` + ev + `, "matches": ["root/r"]}]}`,
			`bad.json: cases[0] ("a"): unknown field "matches" (known fields: name, description, event, match, no_match, variables, actions)`},
		{"no name", `{"cases": [{"event": ` + ev + `, "match": ["root/rs/r"]}]}`, `bad.json: cases[0].name: missing`},
		{"no event", `{"cases": [{"name": "a", "match": ["root/rs/r"]}]}`, `bad.json: cases[0] ("a").event: missing`},
		{"bad event", `{"cases": [{"name": "a", "event": {"type": "t"}, "match": ["root/rs/r"]}]}`, `bad.json: cases[0] ("a").event: invalid event`},
		{"no expectation", `{"cases": [{"name": "a", "event": ` + ev + `}]}`, `bad.json: cases[0] ("a"): no expectations`},
		{"duplicate name", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root/rs/r"]}, {"name": "a", "event": ` + ev + `, "match": ["root/rs/r"]}]}`,
			`bad.json: cases[1].name: "a" is also the name of cases[0]`},
		{"short path", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root"]}]}`, `bad.json: cases[0] ("a").match[0]: rule path "root": want the node names`},
		{"bad name in path", `{"cases": [{"name": "a", "event": ` + ev + `, "no_match": ["root/r s/r"]}]}`, `bad.json: cases[0] ("a").no_match[0]: rule path "root/r s/r": "r s" is not a node or rule name`},
		{"bad iteration", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root/it[]/rs/r"]}]}`, `bad.json: cases[0] ("a").match[0]: rule path "root/it[]/rs/r": "it[]": an iteration is written name[index or key]`},
		{"iteration on a rule", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root/rs/r[1]"]}]}`, `"r[1]" is not a node or rule name`},
		{"match and no_match", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root/rs/r"], "no_match": ["root/rs/r"]}]}`, `bad.json: cases[0] ("a").no_match: root/rs/r is also in match`},
		{"wrong type", `{"cases": [{"name": "a", "event": ` + ev + `, "match": "root/rs/r"}]}`, `bad.json: cases[0] ("a"): match: a JSON string where an array is expected`},
		{"empty variables", `{"cases": [{"name": "a", "event": ` + ev + `, "variables": {"root/rs/r": {}}}]}`, `bad.json: cases[0] ("a").variables["root/rs/r"]: no variables`},
		{"variables path", `{"cases": [{"name": "a", "event": ` + ev + `, "variables": {"r": {"x": 1}}}]}`, `bad.json: cases[0] ("a").variables["r"]: rule path "r"`},
		{"unknown action field", `{"cases": [{"name": "a", "event": ` + ev + `, "actions": {"root/rs/r": [{"id": "logger", "payload": {}, "position": 0}]}}]}`,
			`bad.json: cases[0] ("a").actions["root/rs/r"][0]: unknown field "position" (known fields: id, payload)`},
		{"action without id", `{"cases": [{"name": "a", "event": ` + ev + `, "actions": {"root/rs/r": [{"payload": {}}]}}]}`, `bad.json: cases[0] ("a").actions["root/rs/r"][0]: id: missing`},
		{"payload not an object", `{"cases": [{"name": "a", "event": ` + ev + `, "actions": {"root/rs/r": [{"id": "x", "payload": []}]}}]}`, `bad.json: cases[0] ("a").actions["root/rs/r"][0]: payload: not an object`},
		{"no actions", `{"cases": [{"name": "a", "event": ` + ev + `, "actions": {"root/rs/r": []}}]}`, `bad.json: cases[0] ("a").actions["root/rs/r"]: no actions`},
		{"trailing data", `{"cases": [{"name": "a", "event": ` + ev + `, "match": ["root/rs/r"]}]} {}`, `bad.json: unexpected data after the JSON value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode("bad.json", []byte(tc.file))
			if err == nil {
				t.Fatal("decoded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if _, ok := errors.AsType[*DecodeError](err); !ok {
				t.Errorf("error %T is not a *DecodeError", err)
			}
		})
	}
	_, err := Decode("bad.json", []byte(`{"cases": [], "x": 1}`))
	if !errors.Is(err, ErrUnknownField) {
		t.Errorf("unknown field error %v does not match ErrUnknownField", err)
	}
}

// TestDecode checks a file with every field.
func TestDecode(t *testing.T) {
	t.Parallel()
	f, err := Decode("ok.json", []byte(`{"cases": [{
		"name": "all", "description": "every field",
		"event": {"type": "t", "created_ms": 1, "payload": {"n": 1.50}},
		"match": ["root/it[a%2Fb]/rs/r"], "no_match": ["root/rs/q"],
		"variables": {"root/rs/r": {"v": 1.50, "w": {"x": [1, "y"]}}},
		"actions": {"root/rs/r": [{"id": "logger"}, {"id": "archive", "payload": {"k": null}}]}
	}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Cases[0]
	if f.Name != "ok.json" || c.Name != "all" || c.Description != "every field" || c.Event.Type != "t" {
		t.Errorf("decoded %+v %+v", f, c)
	}
	if p := c.Match[0]; p.String() != "root/it[a%2Fb]/rs/r" || !p.segs[1].iterated || p.segs[1].iteration != "a%2Fb" || p.segs[1].name != "it" {
		t.Errorf("path %+v", p)
	}
	if got := compact(c.Variables[0].Values); got != `{"v":1.50,"w":{"x":[1,"y"]}}` {
		t.Errorf("variables %s", got)
	}
	if a := c.Actions[0].Actions; len(a) != 2 || a[0].ID != "logger" || a[0].Payload != nil || compact(a[1].Payload) != `{"k":null}` {
		t.Errorf("actions %+v", a)
	}
}
