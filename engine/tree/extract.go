package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
)

// extractor is a compiled WITH entry.
type extractor struct {
	name      string
	from      *expr
	kind      config.RegexKind
	re        *regexp.Regexp
	idx       *int
	all       bool
	named     []int // indexes of named groups
	modifiers []modifier
	// line, when set, is what the regex's first match is known to be
	// without running it (lineUpTo): the regex is `.*` or `(.*)`.
	line lineMatch
}

// extractor compiles a WITH entry, sharing it with every identical one of
// the tree.
func (cc *compiler) extractor(name string, ex *config.Extractor) (*extractor, error) {
	return shared(cc.extractors, extractorKey(name, ex), func() (*extractor, error) { return cc.compileExtractor(name, ex) })
}

func (cc *compiler) compileExtractor(name string, ex *config.Extractor) (*extractor, error) {
	from, err := cc.expr(ex.From)
	if err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	re, err := cc.regexp(ex.Regex.Pattern)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	out := &extractor{name: name, from: from, kind: ex.Regex.Kind, re: re, idx: ex.Regex.GroupMatchIdx, all: ex.Regex.AllMatches}
	if out.kind == config.RegexIndexed && !out.all && out.idx != nil {
		// Group 0 always exists; group 1 only in `(.*)`.
		if m, groups := wholeLine(ex.Regex.Pattern); m != lineNone && *out.idx <= groups {
			out.line = m
		}
	}
	if out.kind == config.RegexNamed {
		for i, n := range re.SubexpNames() {
			if n != "" {
				out.named = append(out.named, i)
			}
		}
	}
	for i, m := range ex.Modifiers {
		cm, err := cc.modifier(m)
		if err != nil {
			return nil, fmt.Errorf("modifiers_post[%d]: %w", i, err)
		}
		out.modifiers = append(out.modifiers, cm)
	}
	return out, nil
}

var (
	errNoMatch = errors.New("the regex does not match")
	errNoKey   = errors.New("no key matches the regex")
)

// lineMatch is a regex whose first match is known in advance.
type lineMatch uint8

const (
	lineNone lineMatch = iota
	// lineUpToNL is `.*`: the text up to its first newline.
	lineUpToNL
	// lineAll is `.*` with flag s: the whole text.
	lineAll
)

// match returns the regex's first match in str: `.*` always matches at
// the start (possibly empty) and takes every rune but a newline, an
// invalid byte included (the matcher reads it as U+FFFD).
func (m lineMatch) match(str string) string {
	if m == lineUpToNL {
		if i := strings.IndexByte(str, '\n'); i >= 0 {
			return str[:i]
		}
	}
	return str
}

// wholeLine recognizes the patterns `.*` and `(.*)` (greedy, flag s
// allowed), which extractions use to take a whole value. It returns how
// they match and their number of groups.
func wholeLine(pattern string) (lineMatch, int) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return lineNone, 0
	}
	groups := 0
	if re.Op == syntax.OpCapture {
		re, groups = re.Sub[0], 1
	}
	if re.Op != syntax.OpStar || re.Flags&syntax.NonGreedy != 0 {
		return lineNone, 0
	}
	switch re.Sub[0].Op {
	case syntax.OpAnyCharNotNL:
		return lineUpToNL, groups
	case syntax.OpAnyChar:
		return lineAll, groups
	}
	return lineNone, 0
}

// extract computes the variable's value.
func (x *extractor) extract(s *scope) (any, error) {
	var v any
	var err error
	switch x.kind {
	case config.RegexSingleKey:
		in, ok := x.from.eval(s)
		if !ok {
			return nil, fmt.Errorf("%s cannot be resolved", x.from.describe())
		}
		v, err = x.singleKey(in)
	default:
		str, isStr, ok := x.from.evalString(s)
		if !ok {
			return nil, fmt.Errorf("%s cannot be resolved", x.from.describe())
		}
		if !isStr {
			return nil, fmt.Errorf("%s is not a string", x.from.describe())
		}
		if x.kind == config.RegexNamed {
			v, err = x.namedGroups(str)
		} else {
			v, err = x.indexed(str)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, m := range x.modifiers {
		if v, err = m.apply(s, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// indexedMatch returns the group of one match the extractor asks for, or
// all its groups: group i is str[loc[2i]:loc[2i+1]].
func (x *extractor) indexedMatch(str string, loc []int) (any, error) {
	if x.idx != nil {
		i := *x.idx
		if 2*i+1 >= len(loc) || loc[2*i] < 0 {
			return nil, fmt.Errorf("group %d is not in the match", i)
		}
		return str[loc[2*i]:loc[2*i+1]], nil
	}
	groups := make([]any, 0, len(loc)/2)
	for i := 0; i < len(loc); i += 2 {
		if loc[i] < 0 {
			return nil, fmt.Errorf("group %d did not participate in the match", i/2)
		}
		groups = append(groups, str[loc[i]:loc[i+1]])
	}
	return groups, nil
}

func (x *extractor) indexed(str string) (any, error) {
	if x.line != lineNone {
		return x.line.match(str), nil
	}
	if !x.all && x.idx != nil && *x.idx == 0 {
		// The whole match: no group positions to track, which costs the
		// matcher less.
		loc := x.re.FindStringIndex(str)
		if loc == nil {
			return nil, errNoMatch
		}
		return str[loc[0]:loc[1]], nil
	}
	return x.eachMatch(str, x.indexedMatch)
}

// eachMatch applies the regex to str and returns its first match
// converted by convert, or with all_matches every match converted, in a
// list; errNoMatch when it does not match.
func (x *extractor) eachMatch(str string, convert func(str string, loc []int) (any, error)) (any, error) {
	if !x.all {
		loc := x.re.FindStringSubmatchIndex(str)
		if loc == nil {
			return nil, errNoMatch
		}
		return convert(str, loc)
	}
	locs := x.re.FindAllStringSubmatchIndex(str, -1)
	if len(locs) == 0 {
		return nil, errNoMatch
	}
	out := make([]any, 0, len(locs))
	for _, loc := range locs {
		v, err := convert(str, loc)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// namedMatch returns the named groups of one match as an object.
func (x *extractor) namedMatch(str string, loc []int) (any, error) {
	names := x.re.SubexpNames()
	m := make(map[string]any, len(x.named))
	for _, i := range x.named {
		if loc[2*i] < 0 {
			return nil, fmt.Errorf("group %s did not participate in the match", names[i])
		}
		m[names[i]] = str[loc[2*i]:loc[2*i+1]]
	}
	return m, nil
}

func (x *extractor) namedGroups(str string) (any, error) {
	return x.eachMatch(str, x.namedMatch)
}

func (x *extractor) singleKey(in any) (any, error) {
	m, ok := in.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", x.from.describe())
	}
	var found any
	n := 0
	for k, v := range m {
		if x.re.MatchString(k) {
			n++
			found = v
		}
	}
	switch {
	case n == 0:
		return nil, errNoKey
	case n > 1:
		return nil, fmt.Errorf("expected exactly one key to match the regex, found %d", n)
	}
	return found, nil
}

// modifier is a compiled post-extraction modifier.
type modifier interface {
	apply(s *scope, v any) (any, error)
}

func (cc *compiler) modifier(m *config.Modifier) (modifier, error) {
	switch m.Type {
	case config.ModLowercase:
		return stringModifier{string(m.Type), strings.ToLower}, nil
	case config.ModTrim:
		return stringModifier{string(m.Type), strings.TrimSpace}, nil
	case config.ModToNumber:
		return toNumber{}, nil
	case config.ModMap:
		return mapModifier{mapping: m.Mapping, def: m.DefaultValue}, nil
	case config.ModReplaceAll:
		repl, err := cc.expr(m.Replace)
		if err != nil {
			return nil, fmt.Errorf("replace: %w", err)
		}
		r := &replaceAll{find: m.Find, replace: repl}
		if m.IsRegex {
			if r.re, err = cc.regexp(m.Find); err != nil {
				return nil, fmt.Errorf("find: %w", err)
			}
		}
		return r, nil
	case config.ModDateAndTime:
		loc, err := config.LoadTimezone(m.Timezone)
		if err != nil {
			return nil, err
		}
		return dateAndTime{loc}, nil
	}
	return nil, fmt.Errorf("unknown modifier %q", m.Type)
}

type stringModifier struct {
	name string
	fn   func(string) string
}

func (m stringModifier) apply(_ *scope, v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s needs a string", m.name)
	}
	return m.fn(s), nil
}

type toNumber struct{}

func (toNumber) apply(_ *scope, v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return x, nil
	case string:
		if i, err := strconv.ParseInt(x, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		// Rust's unsigned parser, which Tornado uses, takes one leading +.
		if u, err := strconv.ParseUint(strings.TrimPrefix(x, "+"), 10, 64); err == nil {
			return json.Number(strconv.FormatUint(u, 10)), nil
		}
		if t := strings.TrimLeft(x, "+-"); strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") || strings.Contains(x, "_") {
			return nil, fmt.Errorf("ToNumber: %q is not a number", x)
		}
		f, err := strconv.ParseFloat(x, 64)
		if err != nil && !isRangeErr(err) {
			return nil, fmt.Errorf("ToNumber: %q is not a number", x)
		}
		return floatNumber(f), nil
	}
	return nil, errors.New("ToNumber needs a string or a number")
}

type mapModifier struct {
	mapping map[string]string
	def     *string
}

func (m mapModifier) apply(_ *scope, v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("map needs a string")
	}
	if out, ok := m.mapping[s]; ok {
		return out, nil
	}
	if m.def != nil {
		return *m.def, nil
	}
	return nil, fmt.Errorf("map: no mapping for %q and no default_value", s)
}

type replaceAll struct {
	find    string
	re      *regexp.Regexp
	replace *expr
}

func (r *replaceAll) apply(s *scope, v any) (any, error) {
	str, ok := v.(string)
	if !ok {
		return nil, errors.New("ReplaceAll needs a string")
	}
	if r.re == nil && !strings.Contains(str, r.find) || r.re != nil && !r.re.MatchString(str) {
		return str, nil
	}
	rv, ok := r.replace.eval(s)
	if !ok {
		return nil, fmt.Errorf("ReplaceAll: %s cannot be resolved", r.replace.describe())
	}
	repl, ok := rv.(string)
	if !ok {
		return nil, fmt.Errorf("ReplaceAll: %s is not a string", r.replace.describe())
	}
	if r.re != nil {
		return r.re.ReplaceAllString(str, repl), nil
	}
	return strings.ReplaceAll(str, r.find, repl), nil
}

type dateAndTime struct{ loc *time.Location }

func (d dateAndTime) apply(_ *scope, v any) (any, error) {
	n, ok := v.(json.Number)
	if !ok || !isIntegerText(n) {
		return nil, errors.New("DateAndTime needs an integer timestamp")
	}
	p, ok := parseNum(n)
	if !ok || p.big {
		return nil, fmt.Errorf("DateAndTime: %s is out of range", n)
	}
	t := p.i
	abs := t
	if abs < 0 {
		abs = -abs
	}
	if abs == math.MinInt64 {
		return nil, fmt.Errorf("DateAndTime: %s is out of range", n)
	}
	var tm time.Time
	switch {
	case abs <= 1e11:
		tm = time.Unix(t, 0)
	case abs <= 1e14:
		tm = time.UnixMilli(t)
	case abs <= 1e17:
		tm = time.UnixMicro(t)
	default:
		tm = time.Unix(0, t)
	}
	return tm.In(d.loc).Format("2006-01-02 15:04:05-07:00"), nil
}
