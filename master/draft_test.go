package master_test

import (
	"net/http"
	"testing"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

// TestServer_Draft checks GET /squall/v1/draft: null without a draft, then
// the draft's id and owner, from any node and for any viewer.
func TestServer_Draft(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3)
	leader := c.Leader()
	follower := c.Followers()[0]

	resp, body := c.Get(follower, "/squall/v1/draft", viewToken(c))
	if resp.StatusCode != http.StatusOK || string(body) != "null\n" {
		t.Fatalf("no draft: %d %s, want 200 null", resp.StatusCode, body)
	}

	id, err := c.Server(leader).Store().CreateDraft(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	tenantViewer := c.Token(auth.Claims{User: "bob", Auths: map[string]auth.Authorization{
		"acme": {Path: []string{"root", "acme"}, Roles: []string{"view"}},
	}})
	for _, tok := range []string{viewToken(c), tenantViewer, c.AdminToken} {
		resp, body = c.Get(follower, "/squall/v1/draft", tok)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		d := decode[master.DraftInfo](t, body)
		if d.ID != id || d.Owner != "alice" || d.CreatedMS == 0 || d.UpdatedMS < d.CreatedMS {
			t.Errorf("draft %+v, want %s owned by alice", d, id)
		}
	}

	noView := c.Token(auth.Claims{User: "carol", Auths: map[string]auth.Authorization{
		"x": {Path: []string{"root"}, Roles: []string{"test_event_execute_actions"}},
	}})
	for _, tc := range []struct {
		token  string
		status int
		code   string
	}{
		{"", http.StatusUnauthorized, "UNAUTHORIZED"},
		{noView, http.StatusForbidden, "FORBIDDEN"},
	} {
		resp, body = c.Get(leader, "/squall/v1/draft", tc.token)
		wantError(t, resp, body, tc.status, tc.code)
	}
}
