package config

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func key(k string) Segment { return Segment{Key: k} }
func idx(i int) Segment    { return Segment{Index: i, IsIndex: true} }

// samePath compares paths, taking nil and empty as equal.
func samePath(a, b []Segment) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// Cases follow Tornado's accessor syntax and edge cases (docs/rules.md,
// "Accessors"); a number in a case name is the edge case's number in
// Tornado's list.
func TestParsePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []Segment
		err  error
	}{
		{name: "one key", in: "one", want: []Segment{key("one")}},
		{name: "two keys", in: "one.two", want: []Segment{key("one"), key("two")}},
		{name: "34 trailing dot", in: "one.two.", want: []Segment{key("one"), key("two")}},
		{name: "leading dot", in: ".hello.world", want: []Segment{key("hello"), key("world")}},
		{name: "double dot", in: "a..b", want: []Segment{key("a"), key("b")}},
		{name: "empty", in: "", want: nil},
		{name: "only a dot", in: ".", want: nil},
		{name: "34 empty quoted key", in: `one.""`, want: []Segment{key("one"), key("")}},
		{name: "34 quoted index", in: `one."[1]"`, want: []Segment{key("one"), idx(1)}},
		{name: "34 quoted keys with dots and spaces", in: `"th ir.d".a."fourth".two`,
			want: []Segment{key("th ir.d"), key("a"), key("fourth"), key("two")}},
		{name: "29 quoted key with dots", in: `payload.oids."SNMPv2-SMI::enterprises.14848.2.1.1.6.0"`,
			want: []Segment{key("payload"), key("oids"), key("SNMPv2-SMI::enterprises.14848.2.1.1.6.0")}},
		{name: "36 brackets inside quotes are a key", in: `hello."world[11]".inner[0]`,
			want: []Segment{key("hello"), key("world[11]"), key("inner"), idx(0)}},
		{name: "indexes", in: "hello.world[11].inner[0]",
			want: []Segment{key("hello"), key("world"), idx(11), key("inner"), idx(0)}},
		{name: "consecutive indexes", in: "list[0][12]", want: []Segment{key("list"), idx(0), idx(12)}},
		{name: "index first", in: "[3]", want: []Segment{idx(3)}},
		{name: "quoted key then index", in: `"a.b"[2]`, want: []Segment{key("a.b"), idx(2)}},
		{name: "spaces are part of a bare key", in: "a b.c", want: []Segment{key("a b"), key("c")}},
		{name: "leading zeros", in: "l[007]", want: []Segment{key("l"), idx(7)}},
		{name: "35 quote inside a bare key", in: `o"ne`, err: ErrInvalidKey},
		{name: "35 unterminated quoted key", in: `one."two`, err: ErrInvalidKey},
		{name: "text after a quoted key", in: `"a"b`, err: ErrInvalidKey},
		// Tornado reads a]b as the key "a]b"; Squall asks for quotes: "a]b".
		{name: "closing bracket in a bare key", in: "a]b", err: ErrInvalidKey},
		{name: "index not a number", in: "list[first]", err: ErrInvalidIndex},
		{name: "negative index", in: "list[-1]", err: ErrInvalidIndex},
		{name: "empty index", in: "list[]", err: ErrInvalidIndex},
		{name: "unterminated index", in: "list[0", err: ErrInvalidIndex},
		{name: "index overflows", in: "list[99999999999999999999999]", err: ErrInvalidIndex},
		{name: "quoted index not a number is a key", in: `one."[x]"`, want: []Segment{key("one"), key("[x]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePath(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParsePath(%q) error = %v, want %v", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePath(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePath(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseAccessor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		root Root
		path []Segment
		err  error // nil with errAny false: success
		// errAny: any error will do (no sentinel for that shape).
		errAny bool
	}{
		{name: "whole event", in: "${event}", root: RootEvent},
		{name: "event type", in: "${event.type}", root: RootEvent, path: []Segment{key("type")}},
		{name: "28 trailing dot", in: "${event.payload.}", root: RootEvent, path: []Segment{key("payload")}},
		{name: "29 quoted key", in: `${event.payload.body."second.with.dot"}`, root: RootEvent,
			path: []Segment{key("payload"), key("body"), key("second.with.dot")}},
		{name: "metadata", in: "${event.metadata.tenant_id}", root: RootEvent,
			path: []Segment{key("metadata"), key("tenant_id")}},
		{name: "payload list", in: "${event.payload.list[0].x}", root: RootEvent,
			path: []Segment{key("payload"), key("list"), idx(0), key("x")}},
		{name: "iterator item", in: "${event.iterator.item.labels.severity}", root: RootEvent,
			path: []Segment{key("iterator"), key("item"), key("labels"), key("severity")}},
		{name: "30 own variable", in: "${_variables.body}", root: RootVariables, path: []Segment{key("body")}},
		{name: "30 other rule's variable", in: "${_variables.custom_rule_name.body}", root: RootVariables,
			path: []Segment{key("custom_rule_name"), key("body")}},
		{name: "variable path", in: "${_variables.rule.var[0].field}", root: RootVariables,
			path: []Segment{key("rule"), key("var"), idx(0), key("field")}},
		{name: "item", in: "${item}", root: RootItem},
		{name: "item key", in: "${item.x}", root: RootItem, path: []Segment{key("x")}},
		{name: "41 item index", in: "${item[0].body}", root: RootItem, path: []Segment{idx(0), key("body")}},
		// ParseAccessor classifies; ParseExpr rejects unknown roots in single accessors.
		{name: "27 unknown root", in: "${events.types}", root: RootUnknown, path: []Segment{key("types")}},
		{name: "index root", in: "${[0]}", root: RootUnknown},
		{name: "empty accessor", in: "${.}", err: ErrEmptyAccessor},
		{name: "only dots", in: "${...}", err: ErrEmptyAccessor},
		{name: "index after event", in: "${event[0]}", err: ErrInvalidKey},
		{name: "variables alone", in: "${_variables}", err: ErrInvalidKey},
		{name: "variables trailing dot", in: "${_variables.}", err: ErrInvalidKey},
		{name: "index after variables", in: "${_variables[0]}", err: ErrInvalidKey},
		{name: "index not a number", in: "${event.payload.list[x]}", err: ErrInvalidIndex},
		{name: "35 quote in key", in: `${event.payload.o"ne}`, err: ErrInvalidKey},
		{name: "empty braces", in: "${}", errAny: true},
		{name: "no braces", in: "event.type", errAny: true},
		{name: "no closing brace", in: "${event.type", errAny: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAccessor(tt.in)
			switch {
			case tt.errAny:
				if err == nil {
					t.Fatalf("ParseAccessor(%q) = %+v, want an error", tt.in, got)
				}
				return
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseAccessor(%q) error = %v, want %v", tt.in, err, tt.err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
					t.Errorf("error %q does not quote the accessor", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAccessor(%q): %v", tt.in, err)
			}
			if got.Text != tt.in || got.Root != tt.root || !samePath(got.Path, tt.path) {
				t.Errorf("ParseAccessor(%q) = %+v, want root %d path %v", tt.in, got, tt.root, tt.path)
			}
		})
	}
}

// exprShape renders the parts of an expression: text parts as they are,
// accessor parts as @<root>:<text>.
func exprShape(e *Expr) []string {
	var out []string
	for _, p := range e.Parts {
		if p.Accessor != nil {
			out = append(out, "@"+rootName(p.Accessor.Root)+":"+p.Text)
			continue
		}
		out = append(out, p.Text)
	}
	return out
}

func rootName(r Root) string {
	switch r {
	case RootEvent:
		return "event"
	case RootVariables:
		return "variables"
	case RootItem:
		return "item"
	case RootUnknown:
		return "unknown"
	}
	return "?"
}

func TestParseExpr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		kind     ExprKind
		constant bool
		root     Root     // ExprSingle
		parts    []string // ExprInterpolated, as exprShape renders them
		err      error
	}{
		{name: "constant", in: "email", kind: ExprConstant, constant: true},
		{name: "empty string", in: "", kind: ExprConstant, constant: true},
		{name: "33 constant keeps spaces", in: "  CONSTANT  ", kind: ExprConstant, constant: true},
		{name: "single accessor", in: "${event.payload.count}", kind: ExprSingle, root: RootEvent},
		{name: "single variable", in: "${_variables.temperature}", kind: ExprSingle, root: RootVariables},
		{name: "28 empty payload key", in: "${event.payload.}", kind: ExprSingle, root: RootEvent},
		{name: "33 surrounding spaces interpolate", in: "  ${event.type}  ", kind: ExprInterpolated,
			parts: []string{"  ", "@event:${event.type}", "  "}},
		{name: "two accessors", in: "${event.type}${event.created_ms}", kind: ExprInterpolated,
			parts: []string{"@event:${event.type}", "@event:${event.created_ms}"}},
		{name: "text and accessors", in: "Host ${event.payload.host} is ${event.payload.state}", kind: ExprInterpolated,
			parts: []string{"Host ", "@event:${event.payload.host}", " is ", "@event:${event.payload.state}"}},
		{name: "31 item interpolation is constant", in: "my body is ${item.body}!", kind: ExprInterpolated, constant: true,
			parts: []string{"my body is ", "@item:${item.body}", "!"}},
		{name: "31 item index interpolation is constant", in: "my body is ${item[0].body}!", kind: ExprInterpolated, constant: true,
			parts: []string{"my body is ", "@item:${item[0].body}", "!"}},
		{name: "41 item index alone", in: "${item[0].something}", kind: ExprSingle, root: RootItem, constant: true},
		{name: "item alone is constant", in: "${item}", kind: ExprSingle, root: RootItem, constant: true},
		{name: "item dots kept verbatim", in: "${item...}", kind: ExprSingle, root: RootItem, constant: true},
		{name: "item and event", in: "${item.x} ${event.type}", kind: ExprInterpolated,
			parts: []string{"@item:${item.x}", " ", "@event:${event.type}"}},
		{name: "40 empty braces are text", in: "cost: ${}", kind: ExprConstant, constant: true},
		{name: "empty braces alone", in: "${}", kind: ExprConstant, constant: true},
		{name: "40 empty braces among expressions", in: "${a.b} ${} ${c} ${event.type}", kind: ExprInterpolated,
			parts: []string{"@unknown:${a.b}", " ${} ", "@unknown:${c}", " ", "@event:${event.type}"}},
		{name: "unterminated expression is refused", in: "${event.type", err: ErrUnterminated},
		{name: "unterminated after an expression", in: "${event.type} and ${event.payload.x", err: ErrUnterminated},
		{name: "unterminated after text", in: "cost: ${", err: ErrUnterminated},
		{name: "dollar before expression", in: "$${event.type}", kind: ExprInterpolated,
			parts: []string{"$", "@event:${event.type}"}},
		{name: "brace after expression", in: "${event.type}}", kind: ExprInterpolated,
			parts: []string{"@event:${event.type}", "}"}},
		{name: "no escape syntax", in: `rm \${HOME}p`, kind: ExprInterpolated,
			parts: []string{`rm \`, "@unknown:${HOME}", "p"}},
		{name: "unknown root accepted in interpolation", in: "x ${pippo}", kind: ExprInterpolated,
			parts: []string{"x ", "@unknown:${pippo}"}},
		{name: "27 unknown root in single accessor", in: "${events.types}", err: ErrUnknownRoot},
		{name: "27 unknown root alone", in: "${events}", err: ErrUnknownRoot},
		{name: "26 unknown upper-case root", in: "${WRONG_ARG}", err: ErrUnknownRoot},
		{name: "index root", in: "${[0]}", err: ErrUnknownRoot},
		{name: "index after event", in: "${event[0]}", err: ErrInvalidKey},
		{name: "variables alone", in: "${_variables}", err: ErrInvalidKey},
		{name: "index after variables", in: "${_variables[0]}", err: ErrInvalidKey},
		{name: "empty accessor", in: "${.}", err: ErrEmptyAccessor},
		{name: "empty accessor in interpolation", in: "x ${.}", err: ErrEmptyAccessor},
		{name: "index not a number", in: "${event.payload.list[x]}", err: ErrInvalidIndex},
		{name: "index not a number in interpolation", in: "n=${event.payload.list[x]}", err: ErrInvalidIndex},
		{name: "35 quote in key", in: `${event.payload.o"ne}`, err: ErrInvalidKey},
		{name: "35 unterminated quote", in: `${event.payload.one."two}`, err: ErrInvalidKey},
		{name: "nested opening is part of the path", in: "${a${event.type}", err: ErrUnknownRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := ParseExpr(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseExpr(%q) error = %v, want %v", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseExpr(%q): %v", tt.in, err)
			}
			if e.Text != tt.in || e.Kind != tt.kind {
				t.Fatalf("ParseExpr(%q) = text %q kind %d, want kind %d", tt.in, e.Text, e.Kind, tt.kind)
			}
			if got := e.IsConstant(); got != tt.constant {
				t.Errorf("IsConstant() = %v, want %v", got, tt.constant)
			}
			switch tt.kind {
			case ExprConstant:
				if e.Accessor != nil || e.Parts != nil {
					t.Errorf("constant has accessor %v or parts %v", e.Accessor, e.Parts)
				}
			case ExprSingle:
				if e.Accessor == nil || e.Accessor.Root != tt.root || e.Accessor.Text != tt.in {
					t.Errorf("accessor = %+v, want root %d", e.Accessor, tt.root)
				}
			case ExprInterpolated:
				if got := exprShape(e); !reflect.DeepEqual(got, tt.parts) {
					t.Errorf("parts = %q, want %q", got, tt.parts)
				}
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		path []Segment
		err  error
	}{
		{name: "payload list", in: "${event.payload.alerts}", path: []Segment{key("payload"), key("alerts")}},
		{name: "nested", in: "${event.payload.data.alerts}", path: []Segment{key("payload"), key("data"), key("alerts")}},
		{name: "whole event", in: "${event}"},
		{name: "constant", in: "alerts", err: ErrNotSimpleTarget},
		{name: "empty", in: "", err: ErrNotSimpleTarget},
		{name: "interpolated", in: "x ${event.payload.alerts}", err: ErrNotSimpleTarget},
		{name: "two accessors", in: "${event.payload}${event.type}", err: ErrNotSimpleTarget},
		{name: "variables", in: "${_variables.list}", err: ErrNotSimpleTarget},
		{name: "item", in: "${item.list}", err: ErrNotSimpleTarget},
		{name: "unknown root", in: "${pippo.list}", err: ErrUnknownRoot},
		{name: "bad index", in: "${event.payload.list[x]}", err: ErrInvalidIndex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acc, err := ParseTarget(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseTarget(%q) error = %v, want %v", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tt.in, err)
			}
			if acc.Root != RootEvent || !samePath(acc.Path, tt.path) {
				t.Errorf("ParseTarget(%q) = %+v, want event %v", tt.in, acc, tt.path)
			}
		})
	}
}

func TestSegment_String(t *testing.T) {
	t.Parallel()
	tests := []struct {
		seg  Segment
		want string
	}{
		{key("payload"), "payload"},
		{key("a b"), "a b"},
		{key(""), `""`},
		{key("second.with.dot"), `"second.with.dot"`},
		{key("world[11]"), `"world[11]"`},
		{idx(0), "[0]"},
		{idx(42), "[42]"},
	}
	for _, tt := range tests {
		if got := tt.seg.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.seg, got, tt.want)
		}
		// What String writes parses back to the same segment.
		got, err := ParsePath(tt.seg.String())
		if err != nil || len(got) != 1 || got[0] != tt.seg {
			t.Errorf("ParsePath(%q) = %v, %v; want [%+v]", tt.seg.String(), got, err, tt.seg)
		}
	}
}
