package tree

import (
	"fmt"
	"testing"
)

// matches evaluates a rule whose WHERE is where against an event with the payload.
func matches(t *testing.T, where, payload string) bool {
	t.Helper()
	r := mustRule(t, `{"name":"r","description":"","continue":true,"active":true,"constraint":{"WHERE":`+where+`,"WITH":{}},"actions":[{"id":"a","payload":{}}]}`)
	st, _ := ruleStatus(t, mustCompile(t, rulesetTree(r)), payloadEvent(t, payload))
	if st != RuleMatched && st != RuleNotMatched {
		t.Fatalf("status %s", st)
	}
	return st == RuleMatched
}

// payloadStatus is an event's payload and the status the rule under test
// must have on it.
type payloadStatus struct {
	payload string
	want    RuleStatus
}

// checkRuleStatuses evaluates each payload with tr, a tree of one rule
// (rulesetTree), and checks the rule's status.
func checkRuleStatuses(t *testing.T, tr *Tree, tests []payloadStatus) {
	t.Helper()
	for _, tc := range tests {
		if got, _ := ruleStatus(t, tr, payloadEvent(t, tc.payload)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.payload, got, tc.want)
		}
	}
}

func bin(op string, first, second any) string {
	return fmt.Sprintf(`{"type":%q,"first":%s,"second":%s}`, op, lit(first), lit(second))
}

// lit writes a Go value as JSON; strings starting with a raw marker are verbatim JSON.
func lit(v any) string {
	if s, ok := v.(raw); ok {
		return string(s)
	}
	return fmt.Sprintf("%q", v)
}

type raw string

// Tornado's operator edge cases (docs/rules.md, "Operators").
func TestOperators(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		where   string
		payload string
		want    bool
	}{
		{"equals both missing", bin("equals", "${event.payload.a}", "${event.payload.b}"), `{}`, true},
		{"ne both missing", bin("ne", "${event.payload.a}", "${event.payload.b}"), `{}`, false},
		{"equals one missing", bin("equals", "${event.type}", "${event.payload.b}"), `{}`, false},
		{"ne one missing", bin("ne", "${event.type}", "${event.payload.b}"), `{}`, true},
		{"equals null", bin("equals", "${event.payload.v}", raw("null")), `{"v":null}`, true},
		{"equals missing vs null", bin("equals", "${event.payload.v}", raw("null")), `{}`, false},
		{"equals string vs number", bin("equals", raw(`"1.2"`), raw("1.2")), `{}`, false},
		{"equals maps", bin("equals", "${event.payload.m}", raw(`{"a":1,"b":[1,2]}`)), `{"m":{"b":[1,2],"a":1}}`, true},
		{"equals maps extra key", bin("equals", "${event.payload.m}", raw(`{"a":1}`)), `{"m":{"a":1,"b":2}}`, false},
		{"equals arrays", bin("equals", raw(`[1.1,-2]`), raw(`[1.1,-2]`)), `{}`, true},
		{"equals arrays of different length", bin("equals", raw(`[1.1,2.2]`), raw(`[1.1]`)), `{}`, false},
		// docs/decisions.md decision 14: numbers compare by value (Tornado: false).
		{"decision 14: 1000 equals 1000.0", bin("equals", "${event.payload.v}", raw("1000.0")), `{"v":1000}`, true},
		{"decision 14: 1e3 equals 1000", bin("equals", "${event.payload.v}", raw("1e3")), `{"v":1000}`, true},
		{"decision 14: contains by value", bin("contains", "${event.payload.v}", raw("2.0")), `{"v":[1,2]}`, true},
		{"big integers", bin("equals", "${event.payload.v}", raw("18446744073709551615")), `{"v":18446744073709551615}`, true},
		{"big integers differ", bin("equals", "${event.payload.v}", raw("18446744073709551615")), `{"v":18446744073709551614}`, false},
		{"ge int vs float", bin("ge", raw("1000"), raw("1.2")), `{}`, true},
		{"ge arrays", bin("ge", raw(`["id",110]`), raw(`["id",10,110]`)), `{}`, true},
		{"ge maps", bin("ge", raw(`{"a":1}`), raw(`{"a":1}`)), `{}`, false},
		{"ge strings", bin("ge", "two", "one"), `{}`, true},
		{"ge strings less", bin("ge", "two", "zzz"), `{}`, false},
		{"gt strings bytes", bin("gt", "twelve", "two"), `{}`, false},
		{"gt bools", bin("gt", raw("false"), raw("true")), `{}`, false},
		{"lt bools", bin("lt", raw("false"), raw("true")), `{}`, true},
		{"gt arrays", bin("gt", raw(`[1000000001,-2]`), raw(`[1,-2]`)), `{}`, true},
		{"gt nested arrays", bin("gt", raw(`[["id",557],["one"]]`), raw(`[["id",555],["two"]]`)), `{}`, true},
		{"gt prefix", bin("gt", raw(`[["id",557]]`), raw(`[["id",555],["two"]]`)), `{}`, true},
		{"gt missing", bin("gt", "${event.payload.x}", raw("1")), `{}`, false},
		{"ge null null", bin("ge", raw("null"), raw("null")), `{}`, true},
		{"gt null null", bin("gt", raw("null"), raw("null")), `{}`, false},
		{"gt string vs number", bin("gt", "${event.payload.v}", raw("100")), `{"v":"200"}`, false},
		{"lt array vs number", bin("lt", "${event.payload.v}", raw("3")), `{"v":[{"id":557}]}`, false},
		{"contains substring", bin("contains", "${event.payload.s}", "ell"), `{"s":"hello"}`, true},
		{"contains empty string", bin("contains", "${event.payload.s}", ""), `{"s":"hello"}`, true},
		{"contains array element", bin("contains", raw(`["two or one",999]`), raw("999")), `{}`, true},
		{"contains array needs equality", bin("contains", raw(`["two or one",999]`), "two or one or three"), `{}`, false},
		{"contains array typed", bin("contains", "${event.payload.tags}", "999"), `{"tags":[999]}`, false},
		{"contains array from payload", bin("contains", "${event.payload.tags}", "linux"), `{"tags":["linux","db"]}`, true},
		{"contains map key", bin("contains", raw(`{"key_one":null,"key_two":null}`), "key_two"), `{}`, true},
		{"contains map key missing", bin("contains", raw(`{"key_one":null,"key_two":null}`), "key_three"), `{}`, false},
		{"contains map key null value", bin("contains", "${event.payload.m}", "k1"), `{"m":{"k1":null}}`, true},
		{"contains bool", bin("contains", raw("true"), "true"), `{}`, false},
		{"contains number", bin("contains", raw("999.99"), "9"), `{}`, false},
		{"containsIgnoreCase number second", bin("containsIgnoreCase", raw(`["999"]`), raw("999")), `{}`, false},
		{"containsIgnoreCase bool second", bin("containsIgnoreCase", raw(`["true"]`), raw("true")), `{}`, false},
		{"containsIgnoreCase array", bin("containsIgnoreCase", "${event.payload.v}", "TWo or one"), `{"v":["tWo or oNE",999]}`, true},
		{"containsIgnoreCase array needs equality", bin("containsIgnoreCase", "${event.payload.tags}", "LIN"), `{"tags":["linux"]}`, false},
		{"containsIgnoreCase map key", bin("containsIgnoreCase", raw(`{"key_two":1}`), "KEY_two"), `{}`, true},
		{"containsIgnoreCase number first", bin("containsIgnoreCase", raw("999.99"), "9"), `{}`, false},
		{"containsIgnoreCase substring", bin("containsIgnoreCase", "${event.payload.s}", "WORLD"), `{"s":"Hello World!"}`, true},
		{"equalsIgnoreCase numbers", bin("equalsIgnoreCase", raw("9"), raw("9")), `{}`, false},
		{"equalsIgnoreCase numeric texts", bin("equalsIgnoreCase", "12", "12"), `{}`, true},
		{"equalsIgnoreCase array", bin("equalsIgnoreCase", raw(`["one"]`), "one"), `{}`, false},
		// Case is ignored by comparing lowercase forms, as Tornado does:
		// Unicode folding would also equate the long s with s.
		{"equalsIgnoreCase lowercase forms", bin("equalsIgnoreCase", "Straße", "STRAßE"), `{}`, true},
		{"equalsIgnoreCase long s is not s", bin("equalsIgnoreCase", "ſ", "s"), `{}`, false},
		{"containsIgnoreCase long s in an array", bin("containsIgnoreCase", raw(`["ſ"]`), "S"), `{}`, false},
		{"containsIgnoreCase long s as a key", bin("containsIgnoreCase", raw(`{"ſ":1}`), "s"), `{}`, false},
		{"equalsIgnoreCase texts", bin("equalsIgnoreCase", "${event.payload.s}", "warning"), `{"s":"WaRnInG"}`, true},
		{"regex", `{"type":"regex","regex":"^10\\.0\\.","target":"${event.payload.ip}"}`, `{"ip":"10.0.62.7"}`, true},
		{"regex unanchored", `{"type":"regex","regex":"0\\.62","target":"${event.payload.ip}"}`, `{"ip":"10.0.62.7"}`, true},
		{"regex on number", `{"type":"regex","regex":"9","target":"${event.payload.n}"}`, `{"n":999}`, false},
		{"regex on missing", `{"type":"regex","regex":".*","target":"${event.payload.n}"}`, `{}`, false},
		{"AND empty", `{"type":"AND","operators":[]}`, `{}`, true},
		{"OR empty", `{"type":"OR","operators":[]}`, `{}`, false},
		{"NOT", `{"type":"NOT","operator":` + bin("equals", "a", "b") + `}`, `{}`, true},
		{"literal array strings are not resolved", bin("equals", raw(`["${event.type}"]`), raw(`["${event.type}"]`)), `{}`, true},
		{"interpolated argument", bin("equals", "${event.type}-${event.payload.n}", "test-3"), `{"n":3}`, true},
		{"alias equal", bin("equal", "${event.type}", "test"), `{}`, true},
		{"alias notEqual", bin("notEqual", "${event.type}", "x"), `{}`, true},
		{"alias containIgnoreCase", bin("containIgnoreCase", "${event.type}", "TES"), `{}`, true},
		{"alias equalIgnoreCase", bin("equalIgnoreCase", "${event.type}", "TEST"), `{}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := matches(t, tc.where, tc.payload); got != tc.want {
				t.Errorf("WHERE %s on %s = %v, want %v", tc.where, tc.payload, got, tc.want)
			}
		})
	}
}

// Tornado's fixture 004_cmp_operators.
func TestOperators_cmpFixture(t *testing.T) {
	t.Parallel()
	checkRuleStatuses(t, ruleFileTree(t, "tornado/v1/004_cmp_operators.json", "cmp"), []payloadStatus{
		{`{"value":1000}`, RuleMatched},
		{`{"value":2000}`, RuleNotMatched},
		{`{"value":-1000}`, RuleMatched},
		{`{"value":1000000000.0}`, RuleMatched},
		{`{"value":100}`, RuleMatched},
		{`{"value":110}`, RuleMatched},
		{`{"value":200}`, RuleMatched},
		{`{"value":140}`, RuleNotMatched},
		{`{"value":150}`, RuleNotMatched},
		{`{"value":160}`, RuleNotMatched},
		{`{"message":"WaRnInG"}`, RuleMatched},
		{`{"message":"WaRnInGs"}`, RuleNotMatched},
	})
}

// Tornado's fixture 005_contains_operators.
func TestOperators_containsFixture(t *testing.T) {
	t.Parallel()
	checkRuleStatuses(t, ruleFileTree(t, "tornado/v1/005_contains_operators.json", "contains"), []payloadStatus{
		{`{"value":"Some SOMETHING else"}`, RuleMatched},
		{`{"value":"has a 6 inside"}`, RuleNotMatched}, // second 6 is a number: containsIgnoreCase needs a string
		{`{"value":"Contains test here"}`, RuleMatched},
		{`{"value":"contains TEST here"}`, RuleNotMatched},
		{`{"value":"Contain alias test"}`, RuleMatched},
		{`{"value":["a","SOMETHING"]}`, RuleMatched},
		{`{"value":["a","SOMETHING else"]}`, RuleNotMatched},
		{`{"value":{"something":1}}`, RuleMatched},
		{`{"value":42}`, RuleNotMatched},
	})
}
