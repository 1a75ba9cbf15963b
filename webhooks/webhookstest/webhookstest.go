// Package webhookstest holds helpers for the tests of the packages that
// serve webhooks.
package webhookstest

import (
	"strings"
	"testing"

	"github.com/squallhq/squall/webhooks"
)

// Parse parses a webhook file, failing the test if it is not valid.
func Parse(t testing.TB, file string) *webhooks.Webhook {
	t.Helper()
	w, err := webhooks.Parse(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return w
}
