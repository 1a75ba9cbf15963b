// Package textlist writes lists for people to read: messages and reports
// that name a few items of a list that may be long.
package textlist

import (
	"fmt"
	"strings"
)

// Join names the first shown items of items (name gives an item's text)
// and, when there are more, says "and N more", all separated by sep:
// "a, b, c, and 4 more".
func Join[T any](items []T, shown int, sep string, name func(T) string) string {
	parts := make([]string, 0, min(len(items), shown+1))
	for i, it := range items {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(items)-shown))
			break
		}
		parts = append(parts, name(it))
	}
	return strings.Join(parts, sep)
}
