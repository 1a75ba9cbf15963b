package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Root names what an accessor reads from.
type Root uint8

// The accessor roots.
const (
	// RootEvent reads the event: ${event}, ${event.payload.x}, ${event.iterator.item}.
	RootEvent Root = iota + 1
	// RootVariables reads variables extracted by WITH clauses: ${_variables.x}.
	RootVariables
	// RootItem is reserved for the foreach action: ${item...} is kept verbatim.
	RootItem
	// RootUnknown is any other root. It is accepted inside interpolated
	// strings (where it never resolves) and rejected in single accessors.
	RootUnknown
)

// Segment is one step of an accessor path: a key of an object or an index of an array.
type Segment struct {
	Key     string
	Index   int
	IsIndex bool
}

// String renders the segment as it would be written in an accessor.
func (s Segment) String() string {
	if s.IsIndex {
		return "[" + strconv.Itoa(s.Index) + "]"
	}
	if s.Key == "" || strings.ContainsAny(s.Key, ".[]\"") {
		return `"` + s.Key + `"`
	}
	return s.Key
}

// Accessor is a parsed ${...} expression.
type Accessor struct {
	// Text is the expression as written, with ${ and }.
	Text string
	Root Root
	// Path follows the root: for ${event.payload.a[0]} it is payload, a, [0].
	Path []Segment
}

// ExprKind tells how a configuration string is resolved.
type ExprKind uint8

// The kinds of expression strings.
const (
	// ExprConstant is a string without any ${...}: it resolves to itself.
	ExprConstant ExprKind = iota + 1
	// ExprSingle is exactly one ${...}: it resolves to the referenced value with its own JSON type.
	ExprSingle
	// ExprInterpolated mixes text and ${...}: it resolves to a string.
	ExprInterpolated
)

// Part is one piece of an interpolated string: literal text, or an accessor.
type Part struct {
	Text     string
	Accessor *Accessor
}

// Expr is a parsed configuration string (operator argument, extractor
// source, action payload string, iterator target, ReplaceAll replacement).
type Expr struct {
	Text string
	Kind ExprKind
	// Accessor is set for ExprSingle.
	Accessor *Accessor
	// Parts is set for ExprInterpolated, in order.
	Parts []Part
}

// IsConstant reports whether the expression resolves to its own text without
// reading anything. Strings whose only expressions are ${item...} are constant.
func (e *Expr) IsConstant() bool {
	switch e.Kind {
	case ExprConstant:
		return true
	case ExprSingle:
		return e.Accessor.Root == RootItem
	case ExprInterpolated:
		for _, p := range e.Parts {
			if p.Accessor != nil && p.Accessor.Root != RootItem {
				return false
			}
		}
		return true
	}
	return false
}

// Errors returned by ParseExpr and ParseAccessor.
var (
	ErrEmptyAccessor   = errors.New("empty accessor")
	ErrUnknownRoot     = errors.New("unknown accessor root: it must start with event or _variables")
	ErrInvalidKey      = errors.New("invalid key")
	ErrInvalidIndex    = errors.New("invalid array index")
	ErrNotSimpleTarget = errors.New("not a simple accessor rooted at event")
	ErrUnterminated    = errors.New("unterminated accessor: ${ without a closing }")
)

// ParseExpr parses a configuration string. A string that is exactly one
// ${...} is a single accessor and must use a valid root (event, _variables,
// or item). Interpolated strings accept any root; unknown roots never resolve.
// The text between ${ and } must be non-empty: "${}" is literal text.
func ParseExpr(s string) (*Expr, error) {
	if i := unterminated(s); i >= 0 {
		return nil, fmt.Errorf("%q at byte %d: %w", s, i, ErrUnterminated)
	}
	spans := findExpressions(s)
	if len(spans) == 0 {
		return &Expr{Text: s, Kind: ExprConstant}, nil
	}
	if len(spans) == 1 && spans[0][0] == 0 && spans[0][1] == len(s) {
		acc, err := ParseAccessor(s)
		if err != nil {
			return nil, err
		}
		if acc.Root == RootUnknown {
			return nil, fmt.Errorf("%q: %w", s, ErrUnknownRoot)
		}
		return &Expr{Text: s, Kind: ExprSingle, Accessor: acc}, nil
	}
	e := &Expr{Text: s, Kind: ExprInterpolated}
	prev := 0
	for _, sp := range spans {
		if sp[0] > prev {
			e.Parts = append(e.Parts, Part{Text: s[prev:sp[0]]})
		}
		acc, err := ParseAccessor(s[sp[0]:sp[1]])
		if err != nil {
			return nil, err
		}
		e.Parts = append(e.Parts, Part{Text: s[sp[0]:sp[1]], Accessor: acc})
		prev = sp[1]
	}
	if prev < len(s) {
		e.Parts = append(e.Parts, Part{Text: s[prev:]})
	}
	return e, nil
}

// unterminated returns the offset of a "${" that no "}" follows, or -1:
// "${event.payload.x" is a typo that would otherwise stay literal text.
func unterminated(s string) int {
	i := strings.LastIndex(s, "${")
	if i < 0 || strings.IndexByte(s[i+2:], '}') >= 0 {
		return -1
	}
	return i
}

// findExpressions returns the [start, end) spans of every ${...} in s with
// at least one character between the braces.
func findExpressions(s string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(s)-1; {
		j := strings.Index(s[i:], "${")
		if j < 0 {
			break
		}
		start := i + j
		end := strings.IndexByte(s[start+2:], '}')
		if end < 0 {
			break
		}
		if end == 0 { // "${}" is not an expression
			i = start + 3
			continue
		}
		stop := start + 2 + end + 1
		spans = append(spans, [2]int{start, stop})
		i = stop
	}
	return spans
}

// ParseAccessor parses one ${...} expression.
func ParseAccessor(s string) (*Accessor, error) {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") || len(s) < 4 {
		return nil, fmt.Errorf("%q: not an accessor expression ${...}", s)
	}
	segs, err := ParsePath(s[2 : len(s)-1])
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("%q: %w", s, ErrEmptyAccessor)
	}
	acc := &Accessor{Text: s}
	first := segs[0]
	switch {
	case first.IsIndex:
		acc.Root = RootUnknown
	case first.Key == "event":
		acc.Root = RootEvent
	case first.Key == "_variables":
		acc.Root = RootVariables
	case first.Key == "item":
		acc.Root = RootItem
	default:
		acc.Root = RootUnknown
	}
	acc.Path = segs[1:]
	switch acc.Root {
	case RootEvent:
		if len(acc.Path) > 0 && acc.Path[0].IsIndex {
			return nil, fmt.Errorf("%q: %w: an index cannot follow event", s, ErrInvalidKey)
		}
	case RootVariables:
		if len(acc.Path) == 0 {
			return nil, fmt.Errorf("%q: %w: _variables needs a variable name", s, ErrInvalidKey)
		}
		if acc.Path[0].IsIndex {
			return nil, fmt.Errorf("%q: %w: an index cannot follow _variables", s, ErrInvalidKey)
		}
	}
	return acc, nil
}

// ParsePath splits an accessor path into segments. Keys are separated by
// dots; empty segments are skipped; "quoted keys" may hold dots, spaces and
// brackets; key[N] adds array indexes.
func ParsePath(p string) ([]Segment, error) {
	var segs []Segment
	for len(p) > 0 {
		switch p[0] {
		case '.':
			p = p[1:]
		case '"':
			end := strings.IndexByte(p[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated quoted key in %q", ErrInvalidKey, p)
			}
			key := p[1 : 1+end]
			p = p[2+end:]
			if idx, ok := bracketIndex(key); ok {
				segs = append(segs, Segment{Index: idx, IsIndex: true})
			} else {
				segs = append(segs, Segment{Key: key})
			}
			if len(p) > 0 && p[0] != '.' && p[0] != '[' {
				return nil, fmt.Errorf("%w: text after a quoted key in %q", ErrInvalidKey, p)
			}
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated index in %q", ErrInvalidIndex, p)
			}
			idx, ok := bracketIndex(p[:end+1])
			if !ok {
				return nil, fmt.Errorf("%w: %q is not a non-negative integer", ErrInvalidIndex, p[1:end])
			}
			segs = append(segs, Segment{Index: idx, IsIndex: true})
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			key := p[:end]
			if strings.ContainsAny(key, "\"]") {
				return nil, fmt.Errorf("%w: %q contains a quote or bracket", ErrInvalidKey, key)
			}
			segs = append(segs, Segment{Key: key})
			p = p[end:]
		}
	}
	return segs, nil
}

// bracketIndex parses "[N]" with N a non-negative decimal integer.
func bracketIndex(s string) (int, bool) {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0, false
	}
	digits := s[1 : len(s)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	return n, true
}

// ParseTarget parses an iterator target: a single accessor rooted at event.
func ParseTarget(s string) (*Accessor, error) {
	e, err := ParseExpr(s)
	if err != nil {
		return nil, err
	}
	if e.Kind != ExprSingle || e.Accessor.Root != RootEvent {
		return nil, fmt.Errorf("%q: %w", s, ErrNotSimpleTarget)
	}
	return e.Accessor, nil
}
