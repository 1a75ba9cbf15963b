package treestats

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/fleet"
)

// activeTree is a fixed active tree.
type activeTree struct {
	root  *config.Node
	index uint64
}

func (a activeTree) Active() (*config.Node, uint64) { return a.root, a.index }

func TestAggregator_Handler(t *testing.T) {
	t.Parallel()
	root := config.NewRoot()
	root.Children = []*config.Node{
		{Kind: config.KindRuleset, Name: "rs", Rules: []*config.Rule{{Name: "r", Active: true}, {Name: "idle", Active: true}}},
		{Kind: config.KindFilter, Name: "tenant", Active: true, Children: []*config.Node{{Kind: config.KindRuleset, Name: "inner"}}},
	}
	a := New(Config{})
	now := time.Now()
	a.AddTreeStats("e1", report(4, "i1", now.Add(-time.Minute), 12), now)
	srv := httptest.NewServer(a.Handler(activeTree{root, 4}, &auth.Verifier{AllowUnsigned: true}))
	t.Cleanup(srv.Close)
	tok := func(auths map[string]auth.Authorization) string {
		return auth.EncodeUnsigned(auth.Claims{User: "u", Auths: auths})
	}
	rootView := auth.Authorization{Path: []string{"root"}, Roles: []string{"view"}}
	tenantView := auth.Authorization{Path: []string{"root", "tenant"}, Roles: []string{"view"}}
	get := func(token, query string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+Pattern+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, b := calltest.Do(t, calltest.Client().Do, req)
		return resp.StatusCode, string(b)
	}

	code, body := get(tok(map[string]auth.Authorization{"all": rootView}), "")
	var ans Answer
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.TreeIndex != 4 || ans.Events == nil || *ans.Events != 12 ||
		len(ans.Nodes) != 4 || ans.Nodes[1].Rules[0].Matched != 12 || ans.Nodes[1].Rules[1].Matched != 0 || ans.Nodes[1].LastMatchMS == 0 ||
		ans.Nodes[2].Reached != 0 || len(ans.Engines) != 1 {
		t.Fatalf("root: %d %s", code, body)
	}
	code, body = get(tok(map[string]auth.Authorization{"all": rootView, "t": tenantView}), "?auth=t")
	ans = Answer{}
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Nodes) != 2 || ans.Events != nil || ans.Engines != nil ||
		strings.Join(ans.Nodes[1].Path, "/") != "root/tenant/inner" {
		t.Fatalf("scoped: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, token, query string
		status             int
		want               string
	}{
		{"no token", "", "", 401, "UNAUTHORIZED"},
		{"two authorizations, none named", tok(map[string]auth.Authorization{"all": rootView, "t": tenantView}), "", 400, "name one with ?auth="},
		{"an authorization the token lacks", tok(map[string]auth.Authorization{"t": tenantView}), "?auth=all", 403, "no authorization"},
		{"no view", tok(map[string]auth.Authorization{"f": {Path: []string{"root"}, Roles: []string{"fleet_report"}}}), "", 403, "does not grant view"},
		{"a bad window", tok(map[string]auth.Authorization{"all": rootView}), "?window=2d", 400, "want 1m, 1h, 24h or deploy"},
	} {
		if code, body := get(tc.token, tc.query); code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
	// A subtree the active tree lacks: no nodes.
	gone := auth.Authorization{Path: []string{"root", "gone"}, Roles: []string{"view"}}
	if code, body := get(tok(map[string]auth.Authorization{"g": gone}), ""); code != 200 || !strings.Contains(body, `"nodes":[]`) {
		t.Errorf("a subtree not in the tree: %d %s", code, body)
	}
}

// TestNode_JSON: the answer's form of a node and its rules.
func TestNode_JSON(t *testing.T) {
	t.Parallel()
	n := Node{Path: []string{"root", "rs"}, Type: "Ruleset", Reached: 1, Matched: 2, LastMatchMS: 9, Rules: []fleet.RuleStats{
		{Name: "r", Reached: 1, Matched: 2, Actions: 3, Succeeded: 4, Failed: 5, LastMatchMS: 9},
		{Name: "idle"},
	}}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"path":["root","rs"],"type":"Ruleset","reached":1,"matched":2,"last_match_ms":9,"rules":[` +
		`{"name":"r","reached":1,"matched":2,"actions":3,"succeeded":4,"failed":5,"last_match_ms":9},` +
		`{"name":"idle","reached":0,"matched":0,"actions":0,"succeeded":0,"failed":0,"last_match_ms":0}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
