package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// This file holds the number handling of the collector.
//
// go-jmespath only recognises float64 as a JSON number: a json.Number is a
// string to it, so comparisons and numeric functions would silently fail on
// it. The collector therefore evaluates expressions on the body with every
// number as a float64, and writes every number of an event as a json.Number
// whose text is the shortest text of the float64 (960885, 1.5, 1e+21), as
// encoding/json writes a float64.
//
// Most bodies hold only numbers whose text is exactly that ("canonical"
// numbers). For the others (12345678901234567890, which a float64 cannot
// hold; 1.0; 1e3) the document keeps a table from float64 value to body
// text, and a result number with that value is written with that text, so
// that such numbers pass through unchanged, including through filters,
// sort_by() or max(). A value that the body writes in more than one way is
// left out of the table and written in the shortest form. The one
// approximation: a computed number (length(), sum()) that happens to equal
// such a body number is written with the body's text; both texts denote the
// same float64.

// document is a decoded request body prepared for evaluation.
type document struct {
	// data is the body with every number as a float64.
	data any
	// texts maps the float64 bits of the body's non-canonical numbers to
	// their text, or to "" when the body writes that value in several ways.
	// It is nil when every number is canonical.
	texts map[uint64]string
	// size is the body's length; budget is the output budget and left
	// what the outputs so far left of it (budget.go).
	size         float64
	budget, left int64
}

// newDocument prepares v, decoded with json.Decoder.UseNumber; v is
// converted in place.
func newDocument(v any) document {
	var d document
	eachNumber(v, d.collectText)
	if d.texts != nil {
		eachNumber(v, d.dropCanonicalCollision)
	}
	d.data = toFloats(v)
	return d
}

// eachNumber calls f with every number of v, a value decoded with
// json.Decoder.UseNumber.
func eachNumber(v any, f func(json.Number)) {
	switch v := v.(type) {
	case json.Number:
		f(v)
	case map[string]any:
		for _, e := range v {
			eachNumber(e, f)
		}
	case []any:
		for _, e := range v {
			eachNumber(e, f)
		}
	}
}

// collectText records the text of n if it is not canonical.
func (d *document) collectText(n json.Number) {
	s := string(n)
	if canonical(s) {
		return
	}
	if d.texts == nil {
		d.texts = make(map[uint64]string)
	}
	key := math.Float64bits(parseNumber(s))
	if t, seen := d.texts[key]; seen && t != s {
		s = ""
	}
	d.texts[key] = s
}

// dropCanonicalCollision blanks the text of n's value if n writes it in
// canonical form.
func (d *document) dropCanonicalCollision(n json.Number) {
	if s := string(n); canonical(s) {
		key := math.Float64bits(parseNumber(s))
		if _, ok := d.texts[key]; ok {
			d.texts[key] = ""
		}
	}
}

// parseNumber returns the float64 value of a JSON number text, ±Inf when it
// is out of range.
func parseNumber(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// canonical reports whether the JSON number text s is exactly the text that
// appendNumber gives for its float64 value.
func canonical(s string) bool {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) <= 15 && isDigits(digits) {
		return true // JSON has no leading zeros and 15 digits fit a float64
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	var buf [32]byte
	return string(appendNumber(buf[:0], f)) == s
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// toFloats replaces, in place, every json.Number of v by its float64 value.
func toFloats(v any) any {
	switch v := v.(type) {
	case json.Number:
		return parseNumber(string(v))
	case map[string]any:
		for k, e := range v {
			v[k] = toFloats(e)
		}
	case []any:
		for i, e := range v {
			v[i] = toFloats(e)
		}
	}
	return v
}

// appendNumber appends the JSON text of a finite f: the shortest decimal that
// reads back as f, in exponent form only below 1e-6 or from 1e21 on, as
// encoding/json writes a float64.
func appendNumber(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten a two-digit negative exponent: 1e-07 → 1e-7.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// number converts a float64 result to the json.Number of the event: the
// body's text for that value if it has one, else the shortest text. A value
// that is not finite (and not in the body) gives nil, as JSON has no NaN or
// infinity.
func (d *document) number(f float64) any {
	if t := d.texts[math.Float64bits(f)]; t != "" {
		return json.Number(t)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return json.Number(appendNumber(nil, f))
}

var errNotJSON = errors.New("expression result is not JSON")

// output converts an expression result into event data: new containers
// (results may share data with the body or with constants of the compiled
// expression) and numbers as json.Number.
//
// The JSON size of the result is taken from what the budget has left; an
// output that would exceed it fails with ErrOutputBudget as soon as it
// does, before it is copied any further.
func (d *document) output(v any) (any, error) {
	// Scalars are returned as the interface value they came in: converting
	// them back to any would allocate.
	switch x := v.(type) {
	case nil, bool:
		return v, d.spend(5)
	case string:
		return v, d.spend(len(x) + 2)
	case json.Number:
		return v, d.spend(len(x))
	case float64:
		n := d.number(x)
		if s, ok := n.(json.Number); ok {
			return n, d.spend(len(s))
		}
		return n, d.spend(4)
	case map[string]any:
		if err := d.spend(max(2, 1+len(x))); err != nil { // brackets and commas
			return nil, err
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			if err := d.spend(len(k) + 3); err != nil {
				return nil, err
			}
			var err error
			if m[k], err = d.output(e); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		if err := d.spend(max(2, 1+len(x))); err != nil { // brackets and commas
			return nil, err
		}
		s := make([]any, len(x))
		for i, e := range x {
			var err error
			if s[i], err = d.output(e); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w (%T)", errNotJSON, v)
}

// spend takes n bytes of output from the budget.
func (d *document) spend(n int) error {
	d.left -= int64(n)
	if d.left < 0 {
		return fmt.Errorf("%w: the event built from this %d-byte body would exceed the webhook's budget of %d bytes",
			ErrOutputBudget, int64(d.size), d.budget)
	}
	return nil
}

// jsonType names the JSON type of a decoded value, for error messages.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}
