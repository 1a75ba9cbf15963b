package tree

import (
	"regexp"
	"testing"
)

// TestExtractWholeMatch: group 0 taken with the matcher's whole-match path
// is the submatch path's group 0, and no match is no match.
func TestExtractWholeMatch(t *testing.T) {
	zero := 0
	for _, pat := range []string{`(.*)`, `srv-([0-9]+)`, `a|ab`, `(a+)(b*)`, `^x`, `\d+$`, `(?s).+`} {
		re := regexp.MustCompile(pat)
		x := &extractor{re: re, idx: &zero}
		for _, in := range []string{"", "srv-12.example.com", "ab", "aab", "x\ny", "line\n42", "no match here"} {
			got, err := x.indexed(in)
			loc := re.FindStringSubmatchIndex(in)
			switch {
			case loc == nil && err != errNoMatch:
				t.Errorf("%s on %q: %v, %v, want no match", pat, in, got, err)
			case loc != nil && (err != nil || got != in[loc[0]:loc[1]]):
				t.Errorf("%s on %q: %q, %v, want %q", pat, in, got, err, in[loc[0]:loc[1]])
			}
		}
	}
}
