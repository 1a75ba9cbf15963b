package api

import (
	"slices"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/auth"
)

// Tokens of the scoped-editing tests (docs/decisions.md decision 19): carol edits
// below master only; dave edits at the root; erin is an admin scoped at
// master.
var (
	carol = token("carol", map[string]auth.Authorization{
		"m": {Path: []string{"root", "master"}, Roles: []string{"edit"}},
	})
	dave = token("dave", map[string]auth.Authorization{
		"r": {Path: []string{"root"}, Roles: []string{"edit"}},
	})
	erin = token("erin", map[string]auth.Authorization{
		"m":   {Path: []string{"root", "master"}, Roles: []string{"admin"}},
		"all": {Path: []string{"root"}, Roles: []string{"admin"}},
	})
)

// TestScopedEditing checks that a token scoped to [root, master] cannot
// change the master node itself (its filter isolates the tenant) but can
// change what lies below it.
func TestScopedEditing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraftAs(carol, "m")
	base := cfgPath + "/draft/tree/details/m/" + id + "/"
	export := func() string {
		t.Helper()
		r := e.get(cfgPath+"/draft/tree/export/m/"+id+"/master", carol)
		e.expect(r, 200, "")
		return string(r.body)
	}
	before := export()
	own := []struct{ name, method, body string }{
		{"filter to null", "PUT", `{"type":"Filter","name":"master","description":"master tenant","active":true,"filter":null}`},
		{"rename", "PUT", `{"type":"Filter","name":"other","description":"master tenant","active":true,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"master"}}`},
		{"deactivate", "PUT", `{"type":"Filter","name":"master","description":"master tenant","active":false,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"master"}}`},
		{"change type", "PUT", `{"type":"Iterator","name":"master","description":"","active":true,"target":"${event.payload.x}"}`},
		{"delete", "DELETE", ``},
	}
	for _, tc := range own {
		t.Run("own node: "+tc.name, func(t *testing.T) {
			var r response
			if tc.method == "DELETE" {
				r = e.do("DELETE", base+"master", carol, "", nil)
			} else {
				r = e.send(tc.method, base+"master", carol, tc.body)
			}
			e.expect(r, 403, "SCOPE_NODE_READ_ONLY")
			if p := r.json(t)["params"].(map[string]any); p["PATH"] != "root.master" {
				t.Errorf("params %v", p)
			}
			if export() != before {
				t.Error("a refused edit changed the draft")
			}
		})
	}
	t.Run("own node: import over it", func(t *testing.T) {
		body, ct := multipartBody(t, "file", []byte(`{"version":"1.1","Filter":{"name":"master","filter":{"description":"","active":true,"filter":null},"nodes":[]}}`))
		e.expect(e.do("PUT", cfgPath+"/draft/tree/import/m/"+id+"/master", carol, ct, body), 403, "SCOPE_NODE_READ_ONLY")
		if export() != before {
			t.Error("a refused import changed the draft")
		}
	})
	t.Run("own node: description and children", func(t *testing.T) {
		e.expect(e.send("PUT", base+"master", carol, `{"type":"Filter","name":"master","description":"new words","active":true,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"master"}}`), 200, "")
		// Re-importing its own export (same name, filter and flag) replaces
		// only what lies below it.
		body, ct := multipartBody(t, "file", []byte(export()))
		e.expect(e.do("PUT", cfgPath+"/draft/tree/import/m/"+id+"/master", carol, ct, body), 200, "")
	})
	t.Run("below its node", func(t *testing.T) {
		e.expect(e.send("POST", base+"master", carol, `{"type":"Filter","name":"f","description":"","active":true,"filter":null}`), 200, "")
		e.expect(e.send("PUT", base+"master,f", carol, `{"type":"Filter","name":"g","description":"","active":true,"filter":null}`), 200, "")
		body, ct := multipartBody(t, "file", []byte(`{"version":"1.1","Ruleset":{"name":"imported","rules":[]}}`))
		e.expect(e.do("POST", cfgPath+"/draft/tree/import/m/"+id+"/master", carol, ct, body), 200, "")
		e.expect(e.do("PUT", cfgPath+"/draft/tree/import/m/"+id+"/master,imported", carol, ct, body), 200, "")
		rules := cfgPath + "/draft/rule/details/m/" + id + "/master,archive"
		e.expect(e.send("PUT", rules+"/a2", carol, `{"name":"a2","description":"","continue":false,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`), 200, "")
		e.expect(e.send("PUT", cfgPath+"/draft/rule/move/m/"+id+"/master,archive/a3", carol, `{"position":0}`), 200, "")
		e.expect(e.do("DELETE", rules+"/a1", carol, "", nil), 200, "")
		e.expect(e.do("DELETE", base+"master,g", carol, "", nil), 200, "")
	})
	t.Run("deploy of changes below its node", func(t *testing.T) {
		e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", carol, ""), 200, "")
		e.expect(e.get(cfgPath+"/active/tree/details/m/master,imported", carol), 200, "")
	})
}

// TestScopedDeploy checks that a scoped token deploys a draft only when it
// differs from the active tree below the token's node, whoever made the
// changes, while admins and root-scoped editors deploy anything.
func TestScopedDeploy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraftAs(erin, "all")
	// The admin opens master's filter and adds a node to tenant_a, both
	// outside what carol may change, and one rule below master.
	details := cfgPath + "/draft/tree/details/all/" + id + "/"
	e.expect(e.send("PUT", details+"root,master", erin, `{"type":"Filter","name":"master","description":"master tenant","active":true,"filter":null}`), 200, "")
	e.expect(e.send("POST", details+"root,tenant_a", erin, `{"type":"Ruleset","name":"spy"}`), 200, "")
	e.expect(e.send("POST", cfgPath+"/draft/rule/details/all/"+id+"/root,master,archive", erin, `{"name":"a4","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`), 200, "")
	activeBefore := e.get(cfgPath+"/active/tree/details/m/master", alice)
	e.expect(activeBefore, 200, "")

	// Carol takes the draft over and tries to deploy it.
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", carol, ""), 200, "")
	r := e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", carol, "")
	e.expect(r, 403, "DEPLOY_OUT_OF_SCOPE")
	p := r.json(t)["params"].(map[string]any)
	paths, _ := p["PATHS"].(string)
	if got := strings.Split(paths, ","); !slices.Equal(got, []string{"root.master", "root.tenant_a.spy"}) {
		t.Errorf("PATHS %q, want root.master and root.tenant_a.spy", paths)
	}
	if p["SCOPE"] != "root.master" {
		t.Errorf("SCOPE %v", p["SCOPE"])
	}
	if after := e.get(cfgPath+"/active/tree/details/m/master", alice); string(after.body) != string(activeBefore.body) {
		t.Fatalf("a refused deploy changed the active tree: %s", after.body)
	}
	e.expect(e.get(cfgPath+"/active/rule/details/m/master,archive/a4", alice), 404, "RULE_NOT_FOUND")

	// A root-scoped editor deploys the same draft.
	e.expect(e.send("POST", cfgPath+"/drafts/r/"+id+"/takeover", dave, ""), 200, "")
	e.expect(e.send("POST", cfgPath+"/drafts/r/"+id+"/deploy", dave, ""), 200, "")
	e.expect(e.get(cfgPath+"/active/tree/details/r/root,tenant_a,spy", dave), 200, "")

	// An admin scoped at master deploys a change of master's own node.
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", erin, ""), 200, "")
	e.expect(e.send("PUT", cfgPath+"/draft/tree/details/m/"+id+"/master", erin, `{"type":"Filter","name":"master","description":"changed by an admin","active":true,"filter":null}`), 200, "")
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", erin, ""), 200, "")
	if r := e.get(cfgPath+"/active/tree/details/m/master", alice); !strings.Contains(string(r.body), "changed by an admin") {
		t.Errorf("admin deploy: %s", r.body)
	}

	// Now the draft equals the active tree: carol's change below master
	// deploys.
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", carol, ""), 200, "")
	e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", carol, `{"type":"Ruleset","name":"mine"}`), 200, "")
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", carol, ""), 200, "")
	e.expect(e.get(cfgPath+"/active/tree/details/m/master,mine", alice), 200, "")
}
