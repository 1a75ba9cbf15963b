package tree

import (
	"regexp"
	"testing"
)

// TestExtractWholeMatch: group 0 (and group 1 of `(.*)`) taken with the
// matcher's whole-match path, or without the matcher for `.*` and
// `(.*)`, is what the submatch path gives, and no match is no match.
func TestExtractWholeMatch(t *testing.T) {
	inputs := []string{"", "srv-12.example.com", "ab", "aab", "x\ny", "line\n42", "no match here", "\n", "a\xffb\nc", "\xff\xfe", "é\r\n"}
	for _, pat := range []string{`(.*)`, `.*`, `(?s)(.*)`, `(?s:.*)`, `(?:.*)`, `(.*?)`, `(.+)`, `^(.*)$`, `srv-([0-9]+)`, `a|ab`, `(a+)(b*)`, `^x`, `\d+$`, `(?s).+`} {
		re := regexp.MustCompile(pat)
		line, groups := wholeLine(pat)
		for idx := range 2 {
			x := &extractor{re: re, idx: &idx}
			if line != lineNone && idx <= groups {
				x.line = line
			}
			for _, in := range inputs {
				got, err := x.indexed(in)
				loc := re.FindStringSubmatchIndex(in)
				switch {
				case loc == nil && err != errNoMatch:
					t.Errorf("%s group %d on %q: %v, %v, want no match", pat, idx, in, got, err)
				case loc != nil && 2*idx+1 >= len(loc):
					if err == nil {
						t.Errorf("%s group %d on %q: %q, want an error", pat, idx, in, got)
					}
				case loc != nil && (err != nil || got != in[loc[2*idx]:loc[2*idx+1]]):
					t.Errorf("%s group %d on %q: %q, %v, want %q", pat, idx, in, got, err, in[loc[2*idx]:loc[2*idx+1]])
				}
			}
		}
	}
	for pat, want := range map[string]lineMatch{`(.*)`: lineUpToNL, `.*`: lineUpToNL, `(?s)(.*)`: lineAll, `(.*?)`: lineNone, `(.+)`: lineNone, `a(.*)`: lineNone} {
		if got, _ := wholeLine(pat); got != want {
			t.Errorf("wholeLine(%s) = %d, want %d", pat, got, want)
		}
	}
}
