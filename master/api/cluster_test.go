package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

// TestAPI_cluster runs the API on a real 3-node cluster: requests sent to
// followers are answered exactly as the leader answers them, and every
// error status comes back through the forwarding hop.
func TestAPI_cluster(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mastertest.WithSetup(func(_ int, s *master.Server) {
		a := api.New(api.Default(), s.Store(), s.Verifier(), nil, nil)
		if err := s.Mount(api.Prefix, a.Handler(), master.OnLeader, master.RequestIDs(api.StateWrite)); err != nil {
			t.Fatal(err)
		}
	}))
	leader := c.Leader()
	f := c.Followers()
	if len(f) != 2 {
		t.Fatalf("followers %v", f)
	}
	alice := c.Token(auth.Claims{User: "alice", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"admin"}}}})
	bob := c.Token(auth.Claims{User: "bob", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"edit"}}}})
	const cfg = "/api/v2_beta/config"
	expect := func(node int, method, path, tok, body string, status int, code string) []byte {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		resp, out := c.Do(node, method, path, tok, b)
		if resp.StatusCode != status {
			t.Fatalf("node %d %s %s: %d, want %d: %s", node, method, path, resp.StatusCode, status, out)
		}
		if code != "" {
			var e struct{ Code string }
			if json.Unmarshal(out, &e); e.Code != code {
				t.Fatalf("node %d %s %s: code %q, want %s", node, method, path, e.Code, code)
			}
		}
		return out
	}
	out := expect(f[0], "POST", cfg+"/drafts/all", alice, "", 200, "")
	var d struct{ ID string }
	if err := json.Unmarshal(out, &d); err != nil || d.ID == "" {
		t.Fatalf("draft: %s", out)
	}
	node := cfg + "/draft/tree/details/all/" + d.ID + "/root"
	expect(f[1], "POST", node, alice, `{"type":"Filter","name":"master","description":"","active":true,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"master"}}`, 200, "")
	expect(f[0], "POST", node+",master", alice, `{"type":"Iterator","name":"alerts","description":"","active":true,"target":"${event.payload.alerts}"}`, 200, "")
	expect(f[1], "POST", node+",master", alice, `{"type":"Ruleset","name":"alerts"}`, 409, "VALIDATION_ERROR")
	expect(f[0], "POST", node+",master,alerts", alice, `{"type":"Iterator","name":"inner","description":"","active":true,"target":"${event.payload.x}"}`, 409, "NESTED_ITERATOR_ERROR")
	expect(f[1], "POST", node+",master", alice, `{"type":`, 400, "BAD_REQUEST")
	expect(f[0], "GET", node+",nope", alice, "", 404, "NODE_NOT_FOUND")
	expect(f[1], "POST", node+",master", bob, `{"type":"Ruleset","name":"bobs"}`, 403, "NOT_OWNER")
	expect(f[0], "GET", node+",master", "", "", 401, "UNAUTHORIZED")
	expect(f[1], "GET", cfg+"/active/tree/info/nope", alice, "", 403, "MISSING_REQUIRED_PERMISSIONS")
	// Reads through any node are the same.
	want := expect(leader, "GET", cfg+"/draft/tree/children/all/"+d.ID+"/root,master", alice, "", 200, "")
	for _, i := range f {
		if got := expect(i, "GET", cfg+"/draft/tree/children/all/"+d.ID+"/root,master", alice, "", 200, ""); !bytes.Equal(got, want) {
			t.Errorf("node %d answered %s, the leader %s", i, got, want)
		}
	}
	// Ownership moves through a follower.
	expect(f[1], "POST", cfg+"/drafts/all/"+d.ID+"/takeover", bob, "", 200, "")
	expect(f[0], "POST", cfg+"/drafts/all/"+d.ID+"/deploy", alice, "", 403, "NOT_OWNER")
	expect(f[0], "POST", cfg+"/drafts/all/"+d.ID+"/deploy", bob, "", 200, "")
	for i := range 3 {
		out := expect(i, "GET", cfg+"/active/tree/info/all", alice, "", 200, "")
		if strings.TrimSpace(string(out)) != `{"filters_count":2,"iterators_count":1,"rules_count":0}` {
			t.Errorf("node %d: active tree %s", i, out)
		}
	}
	ev := `{"process_type":"SkipActions","event":{"type":"t","created_ms":1,"metadata":{"tenant_id":"master"},"payload":{"alerts":[1,2]}}}`
	out = expect(f[1], "POST", "/api/v2_beta/event/active/all", alice, ev, 200, "")
	if !strings.Contains(string(out), `"iteration":1`) {
		t.Errorf("test event: %s", out)
	}
	// Wrong content type, through a follower.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", c.URL(f[0])+node, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Content-Type", "text/plain")
	if resp, _ := calltest.Do(t, calltest.Client().Do, req); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("wrong content type through a follower: %d", resp.StatusCode)
	}
}
