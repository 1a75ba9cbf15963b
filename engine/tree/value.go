package tree

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// num is a parsed JSON number: an integer when isInt, else a float.
type num struct {
	i     int64
	u     uint64 // integers above MaxInt64
	f     float64
	isInt bool
	big   bool // the integer is u
}

func parseNum(n json.Number) (num, bool) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return num{i: i, f: float64(i), isInt: true}, true
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return num{u: u, f: float64(u), isInt: true, big: true}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return num{}, false
	}
	return num{f: f}, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// cmpNum compares two numbers by value (docs/decisions.md decision 14: 1000 equals 1000.0).
func cmpNum(a, b num) int {
	if a.isInt && b.isInt {
		switch {
		case a.big && b.big:
			return cmpOrdered(a.u, b.u)
		case a.big:
			return 1 // a > MaxInt64 >= b
		case b.big:
			return -1
		}
		return cmpOrdered(a.i, b.i)
	}
	return cmpOrdered(a.f, b.f)
}

func cmpOrdered[T int64 | uint64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// equal is deep JSON equality with numbers compared by value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		nx, ok1 := parseNum(x)
		ny, ok2 := parseNum(y)
		return ok1 && ok2 && cmpNum(nx, ny) == 0
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// compare orders two values: numbers by value, strings by bytes, false <
// true, null = null, arrays lexicographically. ok is false when the values
// are not comparable (objects, mixed types).
func compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return 0, false
		}
		nx, ok1 := parseNum(x)
		ny, ok2 := parseNum(y)
		if !ok1 || !ok2 || math.IsNaN(nx.f) || math.IsNaN(ny.f) {
			return 0, false
		}
		return cmpNum(nx, ny), true
	case string:
		y, ok := b.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(x, y), true
	case bool:
		y, ok := b.(bool)
		if !ok {
			return 0, false
		}
		switch {
		case x == y:
			return 0, true
		case y:
			return -1, true
		}
		return 1, true
	case nil:
		return 0, b == nil
	case []any:
		y, ok := b.([]any)
		if !ok {
			return 0, false
		}
		for i := 0; i < len(x) && i < len(y); i++ {
			c, ok := compare(x[i], y[i])
			if !ok {
				return 0, false
			}
			if c != 0 {
				return c, true
			}
		}
		return cmpOrdered(int64(len(x)), int64(len(y))), true
	}
	return 0, false
}

// floatNumber returns a float as a JSON number that reads back as a float
// (13 is written 13.0). NaN and infinities have no JSON form: nil.
func floatNumber(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.Number(s)
}

// isIntegerText reports whether a JSON number is written as an integer.
func isIntegerText(n json.Number) bool {
	return !strings.ContainsAny(string(n), ".eE")
}
