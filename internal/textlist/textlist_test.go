package textlist

import (
	"strconv"
	"testing"
)

func TestJoin(t *testing.T) {
	itoa := func(n int) string { return strconv.Itoa(n) }
	for _, tc := range []struct {
		items []int
		want  string
	}{
		{nil, ""},
		{[]int{1}, "1"},
		{[]int{1, 2, 3}, "1, 2, 3"},
		{[]int{1, 2, 3, 4}, "1, 2, 3, and 1 more"},
		{[]int{1, 2, 3, 4, 5, 6}, "1, 2, 3, and 3 more"},
	} {
		if got := Join(tc.items, 3, ", ", itoa); got != tc.want {
			t.Errorf("Join(%v) = %q, want %q", tc.items, got, tc.want)
		}
	}
}
