package master

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDecodeBody: the answers to the bodies a JSON route of the master
// refuses (the join request's), and a body it takes.
func TestDecodeBody(t *testing.T) {
	t.Parallel()
	type join struct {
		ID string `json:"id"`
	}
	for _, tc := range []struct{ body, want string }{
		{`{"id":"x"}`, ""},
		{`{"id":"x","extra":1}`, `400 BAD_REQUEST body: json: unknown field "extra"`},
		{`not json`, `400 BAD_REQUEST body: invalid character 'o' in literal null (expecting 'u')`},
		{`{"id":"x"} {}`, `400 BAD_REQUEST body: trailing data after the JSON value`},
		{`{"id":"` + strings.Repeat("x", 1024) + `"}`, `413 PAYLOAD_TOO_LARGE the body is larger than 1024 bytes`},
		{strings.Repeat("[", 200), `400 BAD_REQUEST body: the JSON nests deeper than 128 levels (offset 128)`},
	} {
		r := httptest.NewRequest(http.MethodPost, "/squall/v1/join", strings.NewReader(tc.body))
		var v join
		err := decodeBody(httptest.NewRecorder(), r, 1024, &v)
		got := ""
		if err != nil {
			e := toAPIError(err)
			got = fmt.Sprintf("%d %s %s", e.Status, e.Code, e.Message)
		}
		if got != tc.want {
			t.Errorf("%.30s: %q, want %q", tc.body, got, tc.want)
		}
	}
}
