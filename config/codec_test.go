package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/goldentest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// assertJSONEqual compares two JSON texts as values (numbers by their text).
func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	g, err := decodeAny(got)
	if err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	w, err := decodeAny([]byte(want))
	if err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("JSON differs\ngot:\n%s\nwant:\n%s", gi, wi)
	}
}

func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mustJSON marshals v or fails the test.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertRoundTrip checks that the export of n decodes to a tree deep-equal to n
// and that encoding is a fixed point.
func assertRoundTrip(t *testing.T, n *Node) []byte {
	t.Helper()
	out, err := EncodeExport(n)
	if err != nil {
		t.Fatalf("EncodeExport: %v", err)
	}
	back, err := DecodeExport(out)
	if err != nil {
		t.Fatalf("DecodeExport of EncodeExport output: %v\n%s", err, out)
	}
	if back.Version != ExportVersion {
		t.Errorf("version = %q, want %q", back.Version, ExportVersion)
	}
	if !reflect.DeepEqual(back.Node, n) {
		t.Errorf("tree changed across EncodeExport/DecodeExport:\n%s", out)
	}
	again, err := EncodeExport(back.Node)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, out) {
		t.Errorf("EncodeExport is not a fixed point:\nfirst:\n%s\nsecond:\n%s", out, again)
	}
	return out
}

// TestExport_Golden decodes each testdata/export/*.input.json, checks that it
// is valid, and compares EncodeExport's output with the .golden.json beside it.
func TestExport_Golden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/export/*.input.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ex, err := DecodeExport(readFile(t, in))
			if err != nil {
				t.Fatalf("DecodeExport: %v", err)
			}
			if err := Validate(ex.Node); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			out := assertRoundTrip(t, ex.Node)
			goldentest.Check(t, filepath.Join("testdata", "export", name+".golden.json"), out, *update)
		})
	}
}

// TestExport_Tornado88 checks the decoded §8.8 example field by field.
func TestExport_Tornado88(t *testing.T) {
	t.Parallel()
	ex, err := DecodeExport(readFile(t, "testdata/export/tornado_8_8.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ex.Version != "1.1" {
		t.Errorf("Version = %q", ex.Version)
	}
	master := ex.Node
	if master.Kind != KindFilter || master.Name != "master" || master.Description != "master tenant" || !master.Active {
		t.Errorf("master = %+v", master)
	}
	if f := master.Filter; f == nil || f.Type != OpEquals || f.First != "${event.metadata.tenant_id}" || f.Second != "master" {
		t.Errorf("master filter = %+v", master.Filter)
	}
	alerts := master.Child("alerts")
	if alerts == nil || alerts.Kind != KindIterator || alerts.Target != "${event.payload.alerts}" || alerts.Description != "per alert" {
		t.Fatalf("alerts = %+v", alerts)
	}
	rs := master.Find([]string{"alerts", "per_alert"})
	if rs == nil || rs.Kind != KindRuleset || len(rs.Rules) != 1 {
		t.Fatalf("per_alert = %+v", rs)
	}
	r := rs.Rules[0]
	if r.Name != "archive_alert" || !r.Continue || !r.Active || r.Where != nil || len(r.With) != 0 {
		t.Errorf("rule = %+v", r)
	}
	wantPayload := map[string]any{"archive_type": "one", "event": "${event.iterator.item}"}
	if len(r.Actions) != 1 || r.Actions[0].ID != "archive" || !reflect.DeepEqual(r.Actions[0].Payload, wantPayload) {
		t.Errorf("actions = %+v", r.Actions)
	}
	catchAll := master.Child("catch_all")
	if catchAll == nil || catchAll.Kind != KindFilter || catchAll.Filter != nil || len(catchAll.Children) != 0 {
		t.Errorf("catch_all = %+v", catchAll)
	}
}

// TestDecodeRule_TornadoV1 decodes Tornado's v1 rule files, which carry no
// name (it came from the file name): name is optional and defaults to "",
// and Validate rejects the empty name.
func TestDecodeRule_TornadoV1(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/tornado/engine/matcher/test_resources/v1/rules/*.json")
	if err != nil || len(files) != 7 {
		t.Fatalf("want 7 v1 rule files, got %d (%v)", len(files), err)
	}
	rs := &Node{Kind: KindRuleset, Name: "v1_rules"}
	for _, f := range files {
		r, err := DecodeRule(readFile(t, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rs.Rules = append(rs.Rules, r)
	}
	checks := []struct {
		file  int
		name  string
		check func(t *testing.T, r *Rule)
	}{
		{0, "", func(t *testing.T, r *Rule) {
			if r.Description != "This is All Emails and Syslogs" || !r.Continue || !r.Active {
				t.Errorf("rule = %+v", r)
			}
			w := r.Where
			if w == nil || w.Type != OpAnd || len(w.Operators) != 2 || w.Operators[0].Type != OpEquals ||
				w.Operators[0].First != "${event.type}" || w.Operators[0].Second != "email" ||
				w.Operators[1].Type != OpOr || len(w.Operators[1].Operators) != 2 || w.Operators[1].Operators[1].Second != "other" {
				t.Errorf("WHERE = %s", mustJSON(t, w))
			}
			if ex := r.With["extracted_temp"]; ex == nil || ex.Regex.Kind != RegexIndexed || ex.Regex.GroupMatchIdx == nil ||
				*ex.Regex.GroupMatchIdx != 2 || ex.Regex.AllMatches || ex.Regex.Pattern != `([0-9]+\sDegrees)` {
				t.Errorf("extracted_temp = %+v", ex)
			}
			if ex := r.With["all_temperatures"]; ex == nil || ex.Regex.GroupMatchIdx != nil || !ex.Regex.AllMatches {
				t.Errorf("all_temperatures = %+v", ex)
			}
			if ex := r.With["all_temperatures_named"]; ex == nil || ex.Regex.Kind != RegexNamed || ex.Regex.AllMatches || ex.Modifiers != nil {
				t.Errorf("all_temperatures_named = %+v", ex)
			}
			if len(r.Actions) != 3 || r.Actions[0].ID != "Monitoring" || r.Actions[2].ID != "Command" {
				t.Fatalf("actions = %s", mustJSON(t, r.Actions))
			}
			cmd := r.Actions[2].Payload["command"].(string)
			if !strings.HasSuffix(cmd, `\${HOME}p`) {
				t.Errorf("command = %q", cmd)
			}
		}},
		{1, "", func(t *testing.T, r *Rule) {
			if r.Where != nil || r.With == nil || len(r.With) != 0 || r.Actions == nil || len(r.Actions) != 0 {
				t.Errorf("rule without WHERE = %+v", r)
			}
		}},
		{2, "", func(t *testing.T, r *Rule) {
			want := map[string]any{"nested_map": map[string]any{"key": "${event.payload.hostname}"}}
			if !reflect.DeepEqual(r.Actions[0].Payload, want) {
				t.Errorf("payload = %#v", r.Actions[0].Payload)
			}
		}},
		{3, "", func(t *testing.T, r *Rule) {
			ops := r.Where.Operators
			if r.Where.Type != OpOr || len(ops) != 5 || ops[0].Second != json.Number("1000") {
				t.Fatalf("WHERE = %s", mustJSON(t, r.Where))
			}
			and := ops[1].Operators
			if and[2].Type != OpNot || and[2].Operator.Type != OpEquals || and[3].Type != OpNotEquals || and[4].Type != OpNotEquals {
				t.Errorf("AND = %s", mustJSON(t, ops[1]))
			}
			if ops[2].Type != OpLess || ops[3].Type != OpGreater || ops[4].Type != OpEqualsIgnoreCase {
				t.Errorf("WHERE = %s", mustJSON(t, r.Where))
			}
		}},
		{4, "", func(t *testing.T, r *Rule) {
			ops := r.Where.Operators
			if ops[0].Type != OpContainsIgnoreCase || ops[1].Second != json.Number("6") || ops[2].Type != OpContains || ops[3].Type != OpContains {
				t.Errorf("WHERE = %s", mustJSON(t, r.Where))
			}
		}},
		{5, "with_single_key_match", func(t *testing.T, r *Rule) {
			ex := r.With["netmasterAlarmNeIpv4Address"]
			if r.Where != nil || ex == nil || ex.Regex.Kind != RegexSingleKey || ex.From != "${event.payload.oids}" {
				t.Errorf("rule = %+v, extractor %+v", r, ex)
			}
		}},
		{6, "with_modifiers", func(t *testing.T, r *Rule) {
			mods := r.With["variable_1"].Modifiers
			if len(mods) != 3 || mods[0].Type != ModLowercase || mods[1].Type != ModReplaceAll || mods[1].IsRegex ||
				mods[1].Find != "to be found" || mods[1].Replace != "to be replaced with" || mods[2].Type != ModTrim {
				t.Errorf("modifiers = %s", mustJSON(t, mods))
			}
		}},
	}
	for _, c := range checks {
		t.Run(filepath.Base(files[c.file]), func(t *testing.T) {
			r := rs.Rules[c.file]
			if r.Name != c.name {
				t.Errorf("Name = %q, want %q", r.Name, c.name)
			}
			c.check(t, r)
		})
	}

	// Unnamed rules are invalid, each reported where it is.
	err = Validate(rs)
	for i := range 5 {
		ve := findValidationError(err, "v1_rules", "", "rules["+string(rune('0'+i))+"].name")
		if ve == nil || !errors.Is(ve, ErrInvalidName) {
			t.Errorf("rule %d: no invalid-name error in\n%v", i, err)
		}
	}
	if n := len(validationErrors(err)); n != 5+4 {
		// 5 empty names and 4 duplicates of "" (the second to fifth).
		t.Errorf("Validate reported %d problems, want 9:\n%v", n, err)
	}

	// Named as the v1 loader names them (the text after the first "_"), the
	// rules are valid and export as in the golden file.
	for i, f := range files {
		if rs.Rules[i].Name == "" {
			base := strings.TrimSuffix(filepath.Base(f), ".json")
			rs.Rules[i].Name = base[strings.IndexByte(base, '_')+1:]
		}
	}
	if err := Validate(rs); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	goldentest.Check(t, "testdata/export/tornado_v1_rules.golden.json", assertRoundTrip(t, rs), *update)
}

func TestDecodeRule_TornadoBenches(t *testing.T) {
	t.Parallel()
	full, err := DecodeRule(readFile(t, "testdata/tornado/engine/matcher/benches_resources/full_match/rules/rule_01.json"))
	if err != nil {
		t.Fatal(err)
	}
	if full.Name != "motion_sensor_4" || full.Where.Type != OpAnd || len(full.Where.Operators) != 4 ||
		full.Where.Operators[2].Type != OpContains || full.Where.Operators[2].Second != " 1" {
		t.Errorf("full match WHERE = %s", mustJSON(t, full.Where))
	}
	if ex := full.With["sensor_room"]; ex == nil || *ex.Regex.GroupMatchIdx != 0 || ex.Regex.Pattern != "(.*)" {
		t.Errorf("sensor_room = %+v", ex)
	}
	if len(full.Actions) != 1 || len(full.Actions[0].Payload) != 6 {
		t.Errorf("actions = %s", mustJSON(t, full.Actions))
	}
	none, err := DecodeRule(readFile(t, "testdata/tornado/engine/matcher/benches_resources/no_match/rules/rule_01.json"))
	if err != nil {
		t.Fatal(err)
	}
	if none.Name != "no_match" || none.Where.Type != OpEquals || none.Where.Second != "zzzzzzzz" {
		t.Errorf("no match = %s", mustJSON(t, none))
	}
	rs := &Node{Kind: KindRuleset, Name: "benches", Rules: []*Rule{full, none}}
	if err := Validate(rs); err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, rs)
}

// A v1 filter file is {description, active, filter}; its filter field is an operator.
func TestDecodeOperator_TornadoV1Filter(t *testing.T) {
	t.Parallel()
	var file struct {
		Description string          `json:"description"`
		Active      bool            `json:"active"`
		Filter      json.RawMessage `json:"filter"`
	}
	dec := json.NewDecoder(bytes.NewReader(readFile(t, "testdata/tornado/engine/matcher/test_resources/v1/filter/filter_01.json")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		t.Fatal(err)
	}
	op, err := DecodeOperator(file.Filter)
	if err != nil {
		t.Fatal(err)
	}
	want := &Operator{Type: OpEquals, First: "${event.type}", Second: "email"}
	if !reflect.DeepEqual(op, want) {
		t.Errorf("DecodeOperator = %+v, want %+v", op, want)
	}
	assertJSONEqual(t, mustJSON(t, op), `{"type": "equals", "first": "${event.type}", "second": "email"}`)
}

// Tornado's v2 on-disk node file is a NodeEdit body whose type tag is in
// lower case ("filter"); with the tag capitalized, DecodeNodeEdit must reject
// the erroneous ones for the reason Tornado does.
func TestDecodeNodeEdit_TornadoErroneousConfigs(t *testing.T) {
	t.Parallel()
	dir := "testdata/tornado/engine/matcher/test_resources/v2/erroneous_configs/"
	tests := []struct {
		file  string
		err   error
		field string
	}{
		{file: "filter_missing_field.json", err: ErrMissingField, field: "name"},
		{file: "filter_unknown_field.json", err: ErrUnknownField, field: "pippo"},
		{file: "filter_wrong_data.json", err: ErrWrongType, field: "name"},
		// A Ruleset has no description, active or filter.
		{file: "filter_wrong_type.json", err: ErrUnknownField, field: "active"},
		{file: "filter_extra_file/filter.json"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			if err := json.Unmarshal(readFile(t, dir+tt.file), &m); err != nil {
				t.Fatal(err)
			}
			typ := m["type"].(string)
			m["type"] = strings.ToUpper(typ[:1]) + typ[1:]
			n, err := DecodeNodeEdit(mustJSON(t, m))
			if tt.err == nil {
				if err != nil || n.Kind != KindFilter || n.Name != "master" || n.Filter.Type != OpAnd {
					t.Errorf("DecodeNodeEdit = %+v, %v", n, err)
				}
				return
			}
			var de *DecodeError
			if !errors.Is(err, tt.err) || !errors.As(err, &de) || de.Field != tt.field {
				t.Errorf("DecodeNodeEdit error = %v, want %v at %q", err, tt.err, tt.field)
			}
		})
	}
	t.Run("empty rule file", func(t *testing.T) {
		t.Parallel()
		_, err := DecodeRule(readFile(t, dir+"filter_extra_file/000000010_rule.json"))
		var de *DecodeError
		if !errors.Is(err, ErrMissingField) || !errors.As(err, &de) || de.Field != "continue" {
			t.Errorf("DecodeRule({}) error = %v, want a missing continue", err)
		}
	})
}

func TestDecodeExport_TornadoWrongVersion(t *testing.T) {
	t.Parallel()
	_, err := DecodeExport(readFile(t, "testdata/tornado/engine/matcher/test_resources/v2/erroneous_configs/config_wrong_version/version.json"))
	var de *DecodeError
	if !errors.Is(err, ErrInvalidValue) || !errors.As(err, &de) || de.Field != "version" {
		t.Errorf("DecodeExport error = %v, want an invalid version", err)
	}
}

func TestDecodeExport_Versions(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"1.0", "1.1"} {
		ex, err := DecodeExport([]byte(`{"version": "` + v + `", "Ruleset": {"name": "rs", "rules": []}}`))
		if err != nil || ex.Version != v || ex.Node.Kind != KindRuleset || ex.Node.Name != "rs" {
			t.Errorf("version %s: %+v, %v", v, ex, err)
		}
		out, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		assertJSONEqual(t, out, `{"version": "`+v+`", "Ruleset": {"name": "rs", "rules": []}}`)
	}
}

// ruleAPIExample is the Rule example of Tornado's API documentation (API form).
const ruleAPIExample = `{ "name": "detect_disk", "description": "", "continue": false, "active": true,
  "constraint": {
    "WHERE": { "type": "AND", "operators": [
      { "type": "equals", "first": "${event.type}", "second": "trap" },
      { "type": "NOT", "operator": { "type": "contains", "first": "${event.payload.msg}", "second": "test" } } ] },
    "WITH": {
      "pct": { "from": "${event.payload.msg}",
               "regex": { "type": "Regex", "match": "([0-9]+)%", "group_match_idx": 1, "all_matches": false },
               "modifiers_post": [ { "type": "ToNumber" } ] },
      "kv":  { "from": "${event.payload.msg}",
               "regex": { "type": "RegexNamedGroups", "named_match": "(?P<k>\\w+)=(?P<v>\\w+)", "all_matches": true },
               "modifiers_post": [] },
      "oid": { "from": "${event.payload.oids}",
               "regex": { "type": "KeyRegex", "single_key_match": "ifDescr\\.[0-9]+" },
               "modifiers_post": [] } } },
  "actions": [ { "id": "logger", "payload": { "pct": "${_variables.pct}" } } ] }`

func TestRule_MarshalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "8.7 example is a fixed point", in: ruleAPIExample, want: ruleAPIExample},
		{
			name: "defaults are written",
			in: `{"name": "r", "continue": true, "active": false,
				"constraint": {"WITH": {
					"a": {"from": "${event.type}", "regex": {"match": "(.)"}},
					"m": {"from": "${event.type}", "regex": {"type": "Regex", "match": ".*"}, "modifiers_post": [{"type": "Map", "mapping": {"x": "1"}}]}}},
				"actions": []}`,
			want: `{"name": "r", "description": "", "continue": true, "active": false,
				"constraint": {"WHERE": null, "WITH": {
					"a": {"from": "${event.type}", "regex": {"type": "Regex", "match": "(.)", "group_match_idx": null, "all_matches": false}, "modifiers_post": []},
					"m": {"from": "${event.type}", "regex": {"type": "Regex", "match": ".*", "group_match_idx": null, "all_matches": false},
					      "modifiers_post": [{"type": "Map", "mapping": {"x": "1"}, "default_value": null}]}}},
				"actions": []}`,
		},
		{
			name: "export form in, typed regex and canonical operators out",
			in: `{"name": "r", "description": "d", "continue": true, "active": true,
				"constraint": {"WHERE": {"type": "notEqual", "first": "${event.type}", "second": 1000.0},
				"WITH": {
					"n": {"from": "${event.payload.x}", "regex": {"named_match": "(?P<a>.)", "all_matches": null}},
					"k": {"from": "${event.payload.x}", "regex": {"single_key_match": "a"}},
					"r": {"from": "${event.payload.x}", "regex": {"match": "a", "group_match_idx": 0, "all_matches": true},
					      "modifiers_post": [{"type": "ReplaceAll", "find": "a", "replace": "b"}, {"type": "DateAndTime", "timezone": "UTC"}, {"type": "Trim"}]}}},
				"actions": [{"id": "a1", "payload": {}}]}`,
			want: `{"name": "r", "description": "d", "continue": true, "active": true,
				"constraint": {"WHERE": {"type": "ne", "first": "${event.type}", "second": 1000.0},
				"WITH": {
					"n": {"from": "${event.payload.x}", "regex": {"type": "RegexNamedGroups", "named_match": "(?P<a>.)", "all_matches": false}, "modifiers_post": []},
					"k": {"from": "${event.payload.x}", "regex": {"type": "KeyRegex", "single_key_match": "a"}, "modifiers_post": []},
					"r": {"from": "${event.payload.x}", "regex": {"type": "Regex", "match": "a", "group_match_idx": 0, "all_matches": true},
					      "modifiers_post": [{"type": "ReplaceAll", "find": "a", "replace": "b", "is_regex": false}, {"type": "DateAndTime", "timezone": "UTC"}, {"type": "Trim"}]}}},
				"actions": [{"id": "a1", "payload": {}}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := DecodeRule([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, mustJSON(t, r), tt.want)
			api, err := EncodeRule(r, FormAPI)
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, api, tt.want)
			// The API output decodes back to the same rule.
			back, err := DecodeRule(api)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, r) {
				t.Errorf("rule changed across EncodeRule/DecodeRule:\n%s", api)
			}
		})
	}
}

func TestEncodeRule_Forms(t *testing.T) {
	t.Parallel()
	r, err := DecodeRule([]byte(ruleAPIExample))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := EncodeRule(r, FormExport)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, exp, strings.NewReplacer(
		`"type": "Regex", `, ``, `"type": "RegexNamedGroups", `, ``, `"type": "KeyRegex", `, ``,
	).Replace(ruleAPIExample))
	// < and > are written as they are, not as \u003c.
	if !bytes.Contains(exp, []byte(`(?P<k>\\w+)`)) {
		t.Errorf("export form escapes HTML characters: %s", exp)
	}
	back, err := DecodeRule(exp)
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("export form does not decode to the same rule: %v", err)
	}
}

func TestDecodeRule(t *testing.T) {
	t.Parallel()
	const valid = `"description": "", "continue": true, "active": true, "constraint": {"WITH": {}}, "actions": []`
	tests := []struct {
		name  string
		in    string
		check func(*Rule) bool
		err   error
		field string
	}{
		{name: "name optional", in: `{` + valid + `}`, check: func(r *Rule) bool { return r.Name == "" }},
		{name: "description optional", in: `{"name": "r", "continue": true, "active": true, "constraint": {"WITH": {}}, "actions": []}`,
			check: func(r *Rule) bool { return r.Name == "r" && r.Description == "" }},
		{name: "WHERE null", in: `{"name": "r", ` + strings.Replace(valid, `{"WITH": {}}`, `{"WHERE": null, "WITH": {}}`, 1) + `}`,
			check: func(r *Rule) bool { return r.Where == nil }},
		{name: "WHERE empty object matches all", in: `{"name": "r", ` + strings.Replace(valid, `{"WITH": {}}`, `{"WHERE": {}, "WITH": {}}`, 1) + `}`,
			check: func(r *Rule) bool { return r.Where == nil }},
		{name: "operator alias", in: `{"name": "r", ` + strings.Replace(valid, `{"WITH": {}}`, `{"WHERE": {"type": "containIgnoreCase", "first": "a", "second": "b"}, "WITH": {}}`, 1) + `}`,
			check: func(r *Rule) bool { return r.Where.Type == OpContainsIgnoreCase }},
		{name: "action payload keeps types", in: `{"name": "r", ` + strings.Replace(valid, `"actions": []`, `"actions": [{"id": "a", "payload": {"n": 1.50, "b": false, "z": null, "l": [1, "x"]}}]`, 1) + `}`,
			check: func(r *Rule) bool {
				return reflect.DeepEqual(r.Actions[0].Payload, map[string]any{"n": json.Number("1.50"), "b": false, "z": nil, "l": []any{json.Number("1"), "x"}})
			}},
		{name: "name null", in: `{"name": null, ` + valid + `}`, err: ErrWrongType, field: "name"},
		{name: "name number", in: `{"name": 1, ` + valid + `}`, err: ErrWrongType, field: "name"},
		{name: "not an object", in: `[]`, err: ErrWrongType, field: ""},
		{name: "unknown field", in: `{"name": "r", "type": "Rule", ` + valid + `}`, err: ErrUnknownField, field: "type"},
		{name: "duplicate field", in: `{"name": "r", "active": false, ` + valid + `}`, err: ErrDuplicateField, field: "active"},
		{name: "regex tag and key disagree", in: `{"name": "r", ` + strings.Replace(valid, `"WITH": {}`, `"WITH": {"v": {"from": "x", "regex": {"type": "RegexNamedGroups", "match": "(?P<a>.)"}}}`, 1) + `}`,
			err: ErrMissingField, field: "constraint.WITH.v.regex.named_match"},
		{name: "regex tag with two keys", in: `{"name": "r", ` + strings.Replace(valid, `"WITH": {}`, `"WITH": {"v": {"from": "x", "regex": {"type": "Regex", "match": "a", "single_key_match": "b"}}}`, 1) + `}`,
			err: ErrInvalidValue, field: "constraint.WITH.v.regex"},
		{name: "trailing data", in: `{"name": "r", ` + valid + `} x`, field: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := DecodeRule([]byte(tt.in))
			if tt.check != nil {
				if err != nil {
					t.Fatal(err)
				}
				if !tt.check(r) {
					t.Errorf("DecodeRule = %s", mustJSON(t, r))
				}
				return
			}
			var de *DecodeError
			if err == nil || !errors.As(err, &de) || de.Field != tt.field || (tt.err != nil && !errors.Is(err, tt.err)) {
				t.Errorf("DecodeRule error = %v, want %v at %q", err, tt.err, tt.field)
			}
		})
	}
}

func TestDecodeOperator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		want  *Operator
		err   error
		field string
	}{
		{name: "empty object", in: `{}`, want: nil},
		{name: "null", in: `null`, want: nil},
		{name: "empty AND", in: `{"type": "AND", "operators": []}`, want: &Operator{Type: OpAnd, Operators: []*Operator{}}},
		{name: "alias", in: `{"type": "equal", "first": 1, "second": [1]}`,
			want: &Operator{Type: OpEquals, First: json.Number("1"), Second: []any{json.Number("1")}}},
		{name: "null arguments", in: `{"type": "ne", "first": null, "second": null}`, want: &Operator{Type: OpNotEquals}},
		{name: "regex", in: `{"type": "regex", "regex": "^a", "target": "${event.type}"}`,
			want: &Operator{Type: OpRegex, Regex: "^a", Target: "${event.type}"}},
		{name: "nested", in: `{"type": "NOT", "operator": {"type": "OR", "operators": [{"type": "lt", "first": 1, "second": 2}]}}`,
			want: &Operator{Type: OpNot, Operator: &Operator{Type: OpOr, Operators: []*Operator{{Type: OpLess, First: json.Number("1"), Second: json.Number("2")}}}}},
		{name: "unknown", in: `{"type": "startsWith", "first": 1, "second": 2}`, err: ErrInvalidOperator, field: "type"},
		{name: "nested unknown", in: `{"type": "AND", "operators": [{"type": "lt", "first": 1, "second": 2}, {"type": "NOT", "operator": {"type": "xor"}}]}`,
			err: ErrInvalidOperator, field: "operators[1].operator.type"},
		{name: "empty child", in: `{"type": "NOT", "operator": {}}`, err: ErrMissingField, field: "operator.type"},
		{name: "binary without second", in: `{"type": "gt", "first": 1}`, err: ErrMissingField, field: "second"},
		{name: "regex with first", in: `{"type": "regex", "regex": "a", "target": "b", "first": 1}`, err: ErrUnknownField, field: "first"},
		{name: "array", in: `[]`, err: ErrWrongType, field: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, err := DecodeOperator([]byte(tt.in))
			if tt.err != nil {
				var de *DecodeError
				if !errors.Is(err, tt.err) || !errors.As(err, &de) || de.Field != tt.field {
					t.Errorf("DecodeOperator error = %v, want %v at %q", err, tt.err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(op, tt.want) {
				t.Errorf("DecodeOperator = %s, want %s", mustJSON(t, op), mustJSON(t, tt.want))
			}
		})
	}
}

func TestOperator_MarshalJSON(t *testing.T) {
	t.Parallel()
	op := &Operator{Type: OpOr} // nil Operators
	assertJSONEqual(t, mustJSON(t, op), `{"type": "OR", "operators": []}`)
	op = &Operator{Type: OpEquals} // nil arguments are JSON null
	assertJSONEqual(t, mustJSON(t, op), `{"type": "equals", "first": null, "second": null}`)
}

// Numbers keep the text they were written with: 1000.0 stays 1000.0.
func TestNumbers_KeepTheirText(t *testing.T) {
	t.Parallel()
	ex, err := DecodeExport(readFile(t, "testdata/export/numbers.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := ex.Node.Rules[0]
	if got := r.Where.Operators[0].Second; got != json.Number("1000.0") {
		t.Errorf("second = %#v, want json.Number(1000.0)", got)
	}
	if got := r.Actions[0].Payload["big"]; got != json.Number("18446744073709551616") {
		t.Errorf("big = %#v", got)
	}
	out, err := EncodeExport(ex.Node)
	if err != nil {
		t.Fatal(err)
	}
	api := mustJSON(t, r)
	for _, tok := range []string{`1000.0`, `1e3`, `-0.5`, `12345678901234567890123`, `0.10`, `1E-7`, `18446744073709551616`, `-0`, `13.0`} {
		if !bytes.Contains(out, []byte(tok)) {
			t.Errorf("export output lacks %s", tok)
		}
		if !bytes.Contains(api, []byte(tok)) {
			t.Errorf("API output lacks %s", tok)
		}
	}
}

func TestNodeDetails_MarshalJSON(t *testing.T) {
	t.Parallel()
	archiveAll, err := DecodeRule([]byte(`{"name": "archive_all", "description": "", "continue": true, "active": true,
		"constraint": {"WITH": {}}, "actions": [{"id": "archive", "payload": {"event": "${event}"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		node *Node
		want string
	}{
		{
			name: "filter",
			node: &Node{Kind: KindFilter, Name: "master", Description: "master tenant", Active: true,
				Filter:   &Operator{Type: OpEquals, First: "${event.metadata.tenant_id}", Second: "master"},
				Children: []*Node{{Kind: KindRuleset, Name: "child"}}},
			want: `{ "type": "Filter", "name": "master", "description": "master tenant", "active": true,
			  "filter": { "type": "equals", "first": "${event.metadata.tenant_id}", "second": "master" } }`,
		},
		{
			name: "match-all filter",
			node: &Node{Kind: KindFilter, Name: "all", Active: true},
			want: `{ "type": "Filter", "name": "all", "description": "", "active": true, "filter": null }`,
		},
		{
			name: "iterator",
			node: &Node{Kind: KindIterator, Name: "alerts", Active: true, Target: "${event.payload.alerts}"},
			want: `{ "type": "Iterator", "name": "alerts", "description": "", "active": true, "target": "${event.payload.alerts}" }`,
		},
		{
			name: "ruleset",
			node: &Node{Kind: KindRuleset, Name: "archive", Rules: []*Rule{archiveAll}},
			want: `{ "type": "Ruleset", "name": "archive",
			  "rules": [ { "name": "archive_all", "description": "", "continue": true, "active": true, "actions": ["archive"] } ] }`,
		},
		{
			name: "empty ruleset",
			node: &Node{Kind: KindRuleset, Name: "empty"},
			want: `{ "type": "Ruleset", "name": "empty", "rules": [] }`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertJSONEqual(t, mustJSON(t, NodeDetails{Node: tt.node}), tt.want)
		})
	}
}

func TestNode_Info(t *testing.T) {
	t.Parallel()
	rules := func(n int) []*Rule {
		out := make([]*Rule, n)
		for i := range out {
			out[i] = &Rule{Name: "r" + string(rune('a'+i)), With: map[string]*Extractor{}}
		}
		return out
	}
	master := &Node{Kind: KindFilter, Name: "master", Description: "master tenant", Active: true, Children: []*Node{
		{Kind: KindRuleset, Name: "a", Rules: rules(10)},
		{Kind: KindRuleset, Name: "b", Rules: rules(1)},
		{Kind: KindIterator, Name: "c", Active: true, Target: "${event.payload.x}", Children: []*Node{
			{Kind: KindRuleset, Name: "d", Rules: rules(1)},
		}},
	}}
	alerts := &Node{Kind: KindIterator, Name: "alerts", Active: true, Target: "${event.payload.alerts}", Children: []*Node{
		{Kind: KindRuleset, Name: "r", Rules: rules(2)},
	}}
	archive := &Node{Kind: KindRuleset, Name: "archive", Rules: rules(1)}
	got := mustJSON(t, []NodeInfo{master.Info(false), alerts.Info(false), archive.Info(false)})
	assertJSONEqual(t, got, `[ { "type": "Filter", "name": "master", "rules_count": 12, "children_count": 3,
	    "description": "master tenant", "has_iterator_ancestor": false, "active": true },
	  { "type": "Iterator", "name": "alerts", "rules_count": 2, "children_count": 1,
	    "description": "", "active": true },
	  { "type": "Ruleset", "name": "archive", "rules_count": 1 } ]`)

	under := &Node{Kind: KindFilter, Name: "f"}
	assertJSONEqual(t, mustJSON(t, under.Info(true)), `{ "type": "Filter", "name": "f", "rules_count": 0, "children_count": 0,
	    "description": "", "has_iterator_ancestor": true, "active": false }`)
	if got := master.Count(); got != (Counts{Filters: 1, Iterators: 1, Rules: 12}) {
		t.Errorf("Count() = %+v", got)
	}
}

func TestDecodeNodeEdit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		want  *Node
		err   error
		field string
	}{
		{name: "filter", in: `{"type": "Filter", "name": "master", "description": "d", "active": true,
			"filter": {"type": "equal", "first": "${event.metadata.tenant_id}", "second": "master"}}`,
			want: &Node{Kind: KindFilter, Name: "master", Description: "d", Active: true,
				Filter: &Operator{Type: OpEquals, First: "${event.metadata.tenant_id}", Second: "master"}}},
		{name: "filter null", in: `{"type": "Filter", "name": "all", "description": "", "active": false, "filter": null}`,
			want: &Node{Kind: KindFilter, Name: "all"}},
		{name: "filter omitted", in: `{"type": "Filter", "name": "all", "description": "", "active": true}`,
			want: &Node{Kind: KindFilter, Name: "all", Active: true}},
		{name: "filter empty object", in: `{"type": "Filter", "name": "all", "description": "", "active": true, "filter": {}}`,
			want: &Node{Kind: KindFilter, Name: "all", Active: true}},
		{name: "iterator", in: `{"type": "Iterator", "name": "alerts", "description": "", "active": true, "target": "${event.payload.alerts}"}`,
			want: &Node{Kind: KindIterator, Name: "alerts", Active: true, Target: "${event.payload.alerts}"}},
		{name: "ruleset", in: `{"type": "Ruleset", "name": "rs"}`, want: &Node{Kind: KindRuleset, Name: "rs"}},
		{name: "ruleset rules ignored", in: `{"type": "Ruleset", "name": "rs", "rules": [{"name": "archive_all", "actions": ["archive"]}]}`,
			want: &Node{Kind: KindRuleset, Name: "rs"}},
		{name: "lowercase type", in: `{"type": "filter", "name": "f", "description": "", "active": true}`, err: ErrInvalidValue, field: "type"},
		{name: "missing type", in: `{"name": "f"}`, err: ErrMissingField, field: "type"},
		{name: "missing name", in: `{"type": "Ruleset"}`, err: ErrMissingField, field: "name"},
		{name: "name null", in: `{"type": "Ruleset", "name": null}`, err: ErrWrongType, field: "name"},
		{name: "missing description", in: `{"type": "Filter", "name": "f", "active": true}`, err: ErrMissingField, field: "description"},
		{name: "missing active", in: `{"type": "Iterator", "name": "i", "description": "", "target": "${event.payload}"}`, err: ErrMissingField, field: "active"},
		{name: "active string", in: `{"type": "Filter", "name": "f", "description": "", "active": "yes"}`, err: ErrWrongType, field: "active"},
		{name: "missing target", in: `{"type": "Iterator", "name": "i", "description": "", "active": true}`, err: ErrMissingField, field: "target"},
		{name: "filter array", in: `{"type": "Filter", "name": "f", "description": "", "active": true, "filter": []}`, err: ErrWrongType, field: "filter"},
		{name: "filter unknown operator", in: `{"type": "Filter", "name": "f", "description": "", "active": true, "filter": {"type": "xor"}}`,
			err: ErrInvalidOperator, field: "filter.type"},
		{name: "iterator with filter", in: `{"type": "Iterator", "name": "i", "description": "", "active": true, "target": "${event.payload}", "filter": null}`,
			err: ErrUnknownField, field: "filter"},
		{name: "filter with target", in: `{"type": "Filter", "name": "f", "description": "", "active": true, "target": "x"}`,
			err: ErrUnknownField, field: "target"},
		{name: "ruleset with description", in: `{"type": "Ruleset", "name": "rs", "description": ""}`, err: ErrUnknownField, field: "description"},
		{name: "children", in: `{"type": "Filter", "name": "f", "description": "", "active": true, "nodes": []}`, err: ErrUnknownField, field: "nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := DecodeNodeEdit([]byte(tt.in))
			if tt.err != nil {
				var de *DecodeError
				if !errors.Is(err, tt.err) || !errors.As(err, &de) || de.Field != tt.field {
					t.Errorf("DecodeNodeEdit error = %v, want %v at %q", err, tt.err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(n, tt.want) {
				t.Errorf("DecodeNodeEdit = %+v, want %+v", n, tt.want)
			}
			// NodeDetails output is a valid NodeEdit body for the same node.
			back, err := DecodeNodeEdit(mustJSON(t, NodeDetails{Node: n}))
			if err != nil || !reflect.DeepEqual(back, n) {
				t.Errorf("NodeDetails does not decode back: %+v, %v", back, err)
			}
		})
	}
}

func TestDecodeExportNode(t *testing.T) {
	t.Parallel()
	n, err := DecodeExportNode([]byte(`{"Iterator": {"name": "i", "iterator": {"description": "", "active": true, "target": "${event.payload}"}, "nodes": []}}`))
	if err != nil || n.Kind != KindIterator || n.Name != "i" || n.Target != "${event.payload}" {
		t.Errorf("DecodeExportNode = %+v, %v", n, err)
	}
	_, err = DecodeExportNode([]byte(`{"version": "1.1", "Ruleset": {"name": "rs", "rules": []}}`))
	if !errors.Is(err, ErrUnknownField) {
		t.Errorf("a node with a version: %v, want an unknown field", err)
	}
}

func TestEncodeExport_Nil(t *testing.T) {
	t.Parallel()
	if _, err := EncodeExport(nil); err == nil {
		t.Error("EncodeExport(nil) succeeded")
	}
	if _, err := json.Marshal(&Export{}); err == nil {
		t.Error("marshalling an Export without a node succeeded")
	}
}

func TestEncodeExport_HTMLCharacters(t *testing.T) {
	t.Parallel()
	rs := &Node{Kind: KindRuleset, Name: "rs", Rules: []*Rule{{
		Name: "r", Description: `a <b> & c, literal \u003c and "quotes"`, Active: true,
		With:    map[string]*Extractor{"v": {From: "${event.payload.x}", Regex: ExtractorRegex{Kind: RegexNamed, Pattern: `(?P<name>\w+)`}}},
		Actions: []*Action{{ID: "a", Payload: map[string]any{"<k>": "\u2028 & \\"}}},
	}}}
	out := assertRoundTrip(t, rs)
	for _, want := range []string{`a <b> & c, literal \\u003c and \"quotes\"`, `(?P<name>\\w+)`, `"<k>": "\u2028 & \\"`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

func TestUnescapeHTML(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"\u003cb\u003e \u0026"`, `"<b> &"`},
		{`"\\u003c"`, `"\\u003c"`},
		{`"\\\u003c"`, `"\\<"`},
		{`"\u00e9 \n \" \\"`, `"\u00e9 \n \" \\"`},
		{`"\u003`, `"\u003`},
		{`\`, `\`},
	}
	for _, tt := range tests {
		if got := string(unescapeHTML([]byte(tt.in))); got != tt.want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestNode_Clone(t *testing.T) {
	t.Parallel()
	var nodes []*Node
	for _, f := range []string{"modifiers", "regex_variants", "iterator", "operators"} {
		ex, err := DecodeExport(readFile(t, "testdata/export/"+f+".input.json"))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, ex.Node)
	}
	for _, n := range nodes {
		before, err := EncodeExport(n)
		if err != nil {
			t.Fatal(err)
		}
		c := n.Clone()
		if !reflect.DeepEqual(c, n) {
			t.Fatalf("Clone of %s differs", n.Name)
		}
		// Change everything the clone holds; the original must not move.
		c.Walk(func(_ []string, x *Node) bool {
			x.Name += "_x"
			if x.Filter != nil {
				x.Filter.Type = OpLess
				for _, o := range x.Filter.Operators {
					o.First = "changed"
				}
			}
			for _, r := range x.Rules {
				r.Name += "_x"
				if r.Where != nil {
					for _, o := range r.Where.Operators {
						if l, ok := o.First.([]any); ok {
							l[0] = "changed"
						}
					}
				}
				for _, e := range r.With {
					e.From = "changed"
					if e.Regex.GroupMatchIdx != nil {
						*e.Regex.GroupMatchIdx = 99
					}
					for _, m := range e.Modifiers {
						if m.Mapping != nil {
							m.Mapping["changed"] = "x"
						}
						if m.DefaultValue != nil {
							*m.DefaultValue = "changed"
						}
					}
				}
				for _, a := range r.Actions {
					a.ID = "changed"
					a.Payload["changed"] = true
				}
			}
			return true
		})
		after, err := EncodeExport(n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("changing the clone of %s changed the original", n.Name)
		}
	}
	if (*Node)(nil).Clone() != nil || (*Operator)(nil).Clone() != nil || (*Rule)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
}
