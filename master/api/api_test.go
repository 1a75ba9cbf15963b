package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/goldentest"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// env is the API mounted on every node of a real 3-node master cluster;
// requests go to the nodes in turn, so most of them cross a follower.
type env struct {
	t       *testing.T
	cluster *mastertest.Cluster
	next    atomic.Int64
	archive string
	// logs holds the API's warnings and errors, of every node.
	logs *logtest.Buffer
}

const activeTree = `{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": {}}, "nodes": [
  {"Filter": {"name": "master", "filter": {"description": "master tenant", "active": true,
     "filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "master"}},
   "nodes": [
     {"Iterator": {"name": "alerts", "iterator": {"description": "", "active": true, "target": "${event.payload.alerts}"},
       "nodes": [{"Ruleset": {"name": "per_alert", "rules": [
         {"name": "critical_only", "description": "", "continue": true, "active": true,
          "constraint": {"WHERE": {"type": "equals", "first": "${event.iterator.item.severity}", "second": "critical"}, "WITH": {}},
          "actions": [{"id": "logger", "payload": {"msg": "alert ${event.iterator.iteration}: ${event.iterator.item.name}"}}]}]}}]}},
     {"Ruleset": {"name": "archive", "rules": [
       {"name": "a1", "description": "", "continue": true, "active": true, "constraint": {"WHERE": null, "WITH": {}},
        "actions": [{"id": "archive", "payload": {"event": "${event}"}}]},
       {"name": "a2", "description": "", "continue": true, "active": true, "constraint": {"WHERE": null, "WITH": {}}, "actions": []},
       {"name": "a3", "description": "", "continue": true, "active": false, "constraint": {"WHERE": null, "WITH": {}}, "actions": []}]}}]}},
  {"Filter": {"name": "tenant_a", "filter": {"description": "", "active": true,
     "filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "tenant_a"}}, "nodes": []}}]}}`

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	archive := t.TempDir()
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := mastertest.TestCluster(t, 3,
		mastertest.WithConfig(func(_ int, c *master.Config) { c.AllowUnsignedTokens = true }),
		mastertest.WithSetup(func(_ int, s *master.Server) {
			acfg := action.Default()
			acfg.Archive.BasePath = archive
			acfg.Archive.DefaultPath = "events.jsonl"
			reg, err := action.NewRegistry(acfg, action.Deps{Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = reg.Close() })
			a := New(cfg, s.Store(), s.Verifier(), reg, logger)
			if err := s.Mount(Prefix, a.Handler(), master.OnLeader, master.RequestIDs(StateWrite)); err != nil {
				t.Fatal(err)
			}
		}))
	ex, err := config.DecodeExport([]byte(activeTree))
	if err != nil {
		t.Fatal(err)
	}
	c.ReplaceActive(ex.Node)
	c.WaitConverged()
	return &env{t: t, cluster: c, archive: archive, logs: logs}
}

// token returns an unsigned token for user with the authorizations.
func token(user string, auths map[string]auth.Authorization) string {
	return auth.EncodeUnsigned(auth.Claims{User: user, Auths: auths})
}

var (
	alice = token("alice", map[string]auth.Authorization{
		"m":    {Path: []string{"root", "master"}, Roles: []string{"view", "edit"}},
		"all":  {Path: []string{"root"}, Roles: []string{"admin"}},
		"ro":   {Path: []string{"root", "master"}, Roles: []string{"view"}},
		"x":    {Path: []string{"root", "master"}, Roles: []string{"test_event_execute_actions"}},
		"mx":   {Path: []string{"root", "master"}, Roles: []string{"view", "test_event_execute_actions"}},
		"gone": {Path: []string{"root", "nowhere"}, Roles: []string{"view"}},
	})
	bob = token("bob", map[string]auth.Authorization{
		"m": {Path: []string{"root", "master"}, Roles: []string{"edit"}},
	})
	// scopedTester edits below root,master and runs test events' actions.
	scopedTester = token("sam", map[string]auth.Authorization{
		"mx": {Path: []string{"root", "master"}, Roles: []string{"view", "edit", "test_event_execute_actions"}},
	})
	// otherAdmin is an admin who owns no draft.
	otherAdmin = token("ada", map[string]auth.Authorization{
		"all": {Path: []string{"root"}, Roles: []string{"admin"}},
	})
	// reviewer reviews: view only, and actions of test events.
	reviewer = token("rita", map[string]auth.Authorization{
		"ro": {Path: []string{"root", "master"}, Roles: []string{"view"}},
		"mx": {Path: []string{"root", "master"}, Roles: []string{"view", "test_event_execute_actions"}},
	})
)

type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (e *env) do(method, path, tok, contentType string, body []byte) response {
	e.t.Helper()
	node := int(e.next.Add(1)) % e.cluster.Len()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.cluster.URL(node)+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, b := calltest.Do(e.t, calltest.Client().Do, req)
	return response{resp.StatusCode, b, resp.Header}
}

func (e *env) get(path, tok string) response { return e.do("GET", path, tok, "", nil) }

func (e *env) send(method, path, tok, body string) response {
	return e.do(method, path, tok, "application/json", []byte(body))
}

// expect checks the status and, for errors, the JSON error's code.
func (e *env) expect(r response, status int, code string) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if r.header.Get("Content-Type") != "application/json" {
		e.t.Errorf("content type %q", r.header.Get("Content-Type"))
	}
	if code != "" {
		m := r.json(e.t)
		if m["code"] != code {
			e.t.Fatalf("code %v, want %s: %s", m["code"], code, r.body)
		}
		if _, ok := m["params"].(map[string]any); !ok {
			e.t.Errorf("error without params object: %s", r.body)
		}
		if msg, _ := m["message"].(string); msg == "" {
			e.t.Errorf("error without message: %s", r.body)
		}
	}
}

const cfgPath = "/api/v2_beta/config"

// newDraft creates a draft as alice and returns its id.
func (e *env) newDraft() string {
	e.t.Helper()
	return e.newDraftAs(alice, "m")
}

// newDraftAs creates a draft with token tok under its authorization
// authName and returns its id.
func (e *env) newDraftAs(tok, authName string) string {
	e.t.Helper()
	r := e.send("POST", cfgPath+"/drafts/"+authName, tok, "")
	e.expect(r, 200, "")
	id, _ := r.json(e.t)["id"].(string)
	if id == "" {
		e.t.Fatalf("no id: %s", r.body)
	}
	return id
}

func TestActiveTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tests := []struct {
		name, path, tok string
		status          int
		code, body      string
	}{
		{"info of the authorization's subtree", "/active/tree/info/m", alice, 200, "", `{"filters_count":1,"iterators_count":1,"rules_count":4}`},
		{"info from the root", "/active/tree/info/all", alice, 200, "", `{"filters_count":3,"iterators_count":1,"rules_count":4}`},
		{"children without a path: the authorization's node", "/active/tree/children/m", alice, 200, "", `[{"type":"Filter","name":"master","rules_count":4,"description":"master tenant","children_count":2,"has_iterator_ancestor":false,"active":true}]`},
		{"children", "/active/tree/children/m/master", alice, 200, "", `[{"type":"Iterator","name":"alerts","rules_count":1,"description":"","children_count":1,"active":true},{"type":"Ruleset","name":"archive","rules_count":3}]`},
		{"children of an iterator", "/active/tree/children/m/master,alerts", alice, 200, "", `[{"type":"Ruleset","name":"per_alert","rules_count":1}]`},
		{"children of a ruleset", "/active/tree/children/m/master,archive", alice, 404, "NOT_A_PARENT", ""},
		{"details of a filter", "/active/tree/details/m/master", alice, 200, "", `{"type":"Filter","name":"master","description":"master tenant","active":true,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"master"}}`},
		{"details of an iterator", "/active/tree/details/m/master,alerts", alice, 200, "", `{"type":"Iterator","name":"alerts","description":"","active":true,"target":"${event.payload.alerts}"}`},
		{"details of a ruleset", "/active/tree/details/m/master,archive", alice, 200, "", `{"type":"Ruleset","name":"archive","rules":[{"name":"a1","description":"","continue":true,"active":true,"actions":["archive"]},{"name":"a2","description":"","continue":true,"active":true,"actions":[]},{"name":"a3","description":"","continue":true,"active":false,"actions":[]}]}`},
		{"details from the root", "/active/tree/details/all/root,tenant_a", alice, 200, "", `{"type":"Filter","name":"tenant_a","description":"","active":true,"filter":{"type":"equals","first":"${event.metadata.tenant_id}","second":"tenant_a"}}`},
		{"rule", "/active/rule/details/m/master,archive/a2", alice, 200, "", `{"name":"a2","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`},
		{"missing node", "/active/tree/details/m/master,nope", alice, 404, "NODE_NOT_FOUND", ""},
		{"missing rule", "/active/rule/details/m/master,archive/nope", alice, 404, "RULE_NOT_FOUND", ""},
		{"rule of a filter", "/active/rule/details/m/master/a1", alice, 404, "NOT_A_RULESET", ""},
		{"authorization root missing from the tree", "/active/tree/info/gone", alice, 404, "NODE_NOT_FOUND", ""},
		{"path outside the authorization", "/active/tree/details/m/tenant_a", alice, 403, "FORBIDDEN_PATH", ""},
		{"path above the authorization", "/active/tree/details/m/root,master", alice, 403, "FORBIDDEN_PATH", ""},
		{"dot-dot", "/active/tree/details/m/master,..,tenant_a", alice, 403, "FORBIDDEN_PATH", ""},
		{"encoded dot-dot", "/active/tree/details/m/master,%2e%2e", alice, 403, "FORBIDDEN_PATH", ""},
		{"encoded slash", "/active/tree/details/m/master%2Ctenant_a%2F..", alice, 403, "FORBIDDEN_PATH", ""},
		{"unknown authorization", "/active/tree/info/nope", alice, 403, "MISSING_REQUIRED_PERMISSIONS", ""},
		{"role without view", "/active/tree/info/x", alice, 403, "MISSING_REQUIRED_PERMISSIONS", ""},
		{"edit implies view", "/active/tree/info/m", bob, 200, "", ""},
		{"no token", "/active/tree/info/m", "", 401, "UNAUTHORIZED", ""},
		{"empty user", "/active/tree/info/m", token("", map[string]auth.Authorization{"m": {Path: []string{"root"}, Roles: []string{"admin"}}}), 401, "UNAUTHORIZED", ""},
		{"garbage token", "/active/tree/info/m", "%%%", 401, "UNAUTHORIZED", ""},
		{"unknown endpoint", "/active/nope", alice, 404, "NOT_FOUND", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.get(cfgPath+tc.path, tc.tok)
			e.expect(r, tc.status, tc.code)
			if tc.body != "" && strings.TrimSpace(string(r.body)) != tc.body {
				t.Errorf("body\n got %s\nwant %s", r.body, tc.body)
			}
		})
	}
	r := e.send("POST", cfgPath+"/active/tree/info/m", alice, "")
	if r.status != http.StatusMethodNotAllowed || r.json(t)["code"] != "METHOD_NOT_ALLOWED" || r.header.Get("Allow") == "" {
		t.Errorf("POST on a GET route: %d", r.status)
	}
}

func TestDraftLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	r := e.get(cfgPath+"/drafts/m", alice)
	e.expect(r, 200, "")
	if string(bytes.TrimSpace(r.body)) != "[]" {
		t.Fatalf("drafts %s", r.body)
	}
	e.expect(e.send("POST", cfgPath+"/drafts/ro", alice, ""), 403, "MISSING_REQUIRED_PERMISSIONS")
	id := e.newDraft()
	r = e.get(cfgPath+"/drafts/m", bob)
	if string(bytes.TrimSpace(r.body)) != fmt.Sprintf("[%q]", id) {
		t.Fatalf("drafts %s", r.body)
	}
	// The draft is a copy of the active tree, readable with view by anyone
	// (decision 8: a reviewer reads it), changed by its owner only.
	e.expect(e.get(cfgPath+"/draft/tree/children/m/"+id, alice), 200, "")
	e.expect(e.get(cfgPath+"/draft/tree/children/m/"+id, bob), 200, "")
	for _, p := range []string{"/draft/tree/children/ro/" + id, "/draft/tree/details/ro/" + id + "/master", "/draft/tree/export/ro/" + id + "/master"} {
		e.expect(e.get(cfgPath+p, reviewer), 200, "")
	}
	r = e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", bob, `{"type":"Ruleset","name":"bobs"}`)
	e.expect(r, 403, "NOT_OWNER")
	if p := r.json(t)["params"].(map[string]any); p["OWNER"] != "alice" || p["ID"] != id {
		t.Errorf("params %v", p)
	}
	e.expect(e.get(cfgPath+"/draft/tree/children/m/nope", alice), 404, "DRAFT_NOT_FOUND")
	// Bob takes over: alice is refused from now on.
	r = e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", bob, "")
	e.expect(r, 200, "")
	if string(bytes.TrimSpace(r.body)) != "null" {
		t.Errorf("takeover answered %s, want null (decision 9)", r.body)
	}
	// The spec's state table: after a takeover, any draft request by the
	// previous owner is rejected, reads included (decision 8), on every
	// node; a reviewer with view still reads the draft.
	displacedReads := []string{"/draft/tree/children/m/" + id, "/draft/tree/details/m/" + id + "/master",
		"/draft/tree/export/m/" + id + "/master", "/draft/tree/children/all/" + id, "/draft/rule/details/m/" + id + "/master,archive/a1"}
	for _, p := range displacedReads {
		for range e.cluster.Len() {
			r := e.get(cfgPath+p, alice)
			e.expect(r, 403, "NOT_OWNER")
			if p := r.json(t)["params"].(map[string]any); p["OWNER"] != "bob" || p["ID"] != id {
				t.Errorf("params %v", p)
			}
		}
		e.expect(e.get(cfgPath+strings.NewReplacer("/m/", "/ro/", "/all/", "/ro/").Replace(p), reviewer), 200, "")
	}
	e.expect(e.send("POST", "/api/v2_beta/event/draft/m/"+id, alice, workedEvent), 403, "NOT_OWNER")
	e.expect(e.send("POST", "/api/v2_beta/event/draft/ro/"+id, reviewer, workedEvent), 200, "")
	e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, `{"type":"Ruleset","name":"alices"}`), 403, "NOT_OWNER")
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", alice, ""), 403, "NOT_OWNER")
	e.expect(e.do("DELETE", cfgPath+"/drafts/m/"+id, alice, "", nil), 403, "NOT_OWNER")
	// Until she takes it over again: then bob is the displaced one.
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", alice, ""), 200, "")
	e.expect(e.get(cfgPath+displacedReads[1], alice), 200, "")
	e.expect(e.get(cfgPath+displacedReads[1], bob), 403, "NOT_OWNER")
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", bob, ""), 200, "")
	e.expect(e.get(cfgPath+displacedReads[1], bob), 200, "")
	// Bob edits and deploys: the active tree changes, the draft stays.
	e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", bob, `{"type":"Ruleset","name":"new_rs"}`), 200, "")
	e.expect(e.get(cfgPath+"/active/tree/details/m/master,new_rs", alice), 404, "NODE_NOT_FOUND")
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", bob, ""), 200, "")
	e.expect(e.get(cfgPath+"/active/tree/details/m/master,new_rs", alice), 200, "")
	r = e.get(cfgPath+"/drafts/m", alice)
	if string(bytes.TrimSpace(r.body)) != fmt.Sprintf("[%q]", id) {
		t.Fatalf("the draft was not kept after deploy: %s", r.body)
	}
	e.expect(e.do("DELETE", cfgPath+"/drafts/m/"+id, bob, "", nil), 200, "")
	r = e.get(cfgPath+"/drafts/m", alice)
	if string(bytes.TrimSpace(r.body)) != "[]" {
		t.Fatalf("drafts after delete %s", r.body)
	}
	e.expect(e.send("POST", cfgPath+"/drafts/m/"+id+"/takeover", bob, ""), 404, "DRAFT_NOT_FOUND")
	// Creating again gives a new id and overwrites.
	id2 := e.newDraft()
	if id2 == id {
		t.Error("draft ids are reused")
	}
	if id3 := e.newDraft(); id3 == id2 {
		t.Error("draft ids are reused")
	}
}

// exportOf returns the export of the draft's subtree at path.
func (e *env) exportOf(id, path string) string {
	e.t.Helper()
	r := e.get(cfgPath+"/draft/tree/export/m/"+id+"/"+path, alice)
	e.expect(r, 200, "")
	return string(r.body)
}

func TestDraftNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	base := cfgPath + "/draft/tree/details/m/" + id + "/"
	before := e.exportOf(id, "master")
	failures := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"duplicate name", "POST", "master", `{"type":"Ruleset","name":"archive"}`, 409, "VALIDATION_ERROR"},
		{"child of a ruleset", "POST", "master,archive", `{"type":"Ruleset","name":"x"}`, 400, "RULESET_HAS_NO_CHILDREN"},
		{"missing parent", "POST", "master,nope", `{"type":"Ruleset","name":"x"}`, 404, "NODE_NOT_FOUND"},
		{"nested iterator", "POST", "master,alerts", `{"type":"Iterator","name":"inner","description":"","active":true,"target":"${event.payload.x}"}`, 409, "NESTED_ITERATOR_ERROR"},
		{"bad regex", "POST", "master", `{"type":"Filter","name":"f","description":"","active":true,"filter":{"type":"regex","regex":"(","target":"${event.type}"}}`, 409, "VALIDATION_ERROR"},
		{"bad accessor", "POST", "master", `{"type":"Filter","name":"f","description":"","active":true,"filter":{"type":"equals","first":"${pippo}","second":"x"}}`, 409, "VALIDATION_ERROR"},
		{"bad iterator target", "POST", "master", `{"type":"Iterator","name":"i","description":"","active":true,"target":"x ${event.type}"}`, 409, "VALIDATION_ERROR"},
		{"invalid name", "POST", "master", `{"type":"Ruleset","name":"a-b"}`, 409, "VALIDATION_ERROR"},
		{"unknown field", "POST", "master", `{"type":"Ruleset","name":"x","color":"red"}`, 400, "BAD_REQUEST"},
		{"malformed JSON", "POST", "master", `{"type":`, 400, "BAD_REQUEST"},
		{"unknown type", "POST", "master", `{"type":"Folder","name":"x"}`, 400, "BAD_REQUEST"},
		{"edit with another type", "PUT", "master,archive", `{"type":"Filter","name":"archive","description":"","active":true}`, 400, "WRONG_NODE_TYPE"},
		{"rename onto a sibling", "PUT", "master,archive", `{"type":"Ruleset","name":"alerts"}`, 409, "VALIDATION_ERROR"},
		{"edit a missing node", "PUT", "master,nope", `{"type":"Ruleset","name":"nope"}`, 404, "NODE_NOT_FOUND"},
		{"delete a missing node", "DELETE", "master,nope", ``, 404, "NODE_NOT_FOUND"},
		{"outside the authorization", "POST", "tenant_a", `{"type":"Ruleset","name":"x"}`, 403, "FORBIDDEN_PATH"},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.method == "DELETE" {
				r = e.do("DELETE", base+tc.path, alice, "", nil)
			} else {
				r = e.send(tc.method, base+tc.path, alice, tc.body)
			}
			e.expect(r, tc.status, tc.code)
			if after := e.exportOf(id, "master"); after != before {
				t.Errorf("a refused request changed the draft")
			}
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		e.expect(e.do("POST", base+"master", alice, "text/plain", []byte(`{"type":"Ruleset","name":"x"}`)), 415, "UNSUPPORTED_MEDIA_TYPE")
	})
	t.Run("view cannot edit", func(t *testing.T) {
		e.expect(e.send("POST", cfgPath+"/draft/tree/details/ro/"+id+"/master", alice, `{"type":"Ruleset","name":"x"}`), 403, "MISSING_REQUIRED_PERMISSIONS")
	})
	t.Run("create, edit, delete", func(t *testing.T) {
		e.expect(e.send("POST", base+"master", alice, `{"type":"Filter","name":"f","description":"d","active":true,"filter":null}`), 200, "")
		e.expect(e.send("POST", base+"master,f", alice, `{"type":"Iterator","name":"it","description":"","active":true,"target":"${event.payload.list}"}`), 200, "")
		e.expect(e.send("PUT", base+"master,f", alice, `{"type":"Filter","name":"g","description":"changed","active":false,"filter":{"type":"equals","first":"${event.type}","second":"x"}}`), 200, "")
		r := e.get(base+"master,g", alice)
		e.expect(r, 200, "")
		if !strings.Contains(string(r.body), `"description":"changed"`) || !strings.Contains(string(r.body), `"active":false`) {
			t.Errorf("details after edit: %s", r.body)
		}
		// Children stay with the edited node.
		e.expect(e.get(base+"master,g,it", alice), 200, "")
		// A filter under an iterator reports it.
		e.expect(e.send("POST", base+"master,g,it", alice, `{"type":"Filter","name":"under","description":"","active":true}`), 200, "")
		r = e.get(cfgPath+"/draft/tree/children/m/"+id+"/master,g,it", alice)
		if !strings.Contains(string(r.body), `"has_iterator_ancestor":true`) {
			t.Errorf("children of an iterator: %s", r.body)
		}
		e.expect(e.do("DELETE", base+"master,g", alice, "", nil), 200, "")
		e.expect(e.get(base+"master,g,it", alice), 404, "NODE_NOT_FOUND")
	})
	t.Run("the root cannot be edited or deleted", func(t *testing.T) {
		e.expect(e.send("PUT", cfgPath+"/draft/tree/details/all/"+id+"/root", alice, `{"type":"Filter","name":"root","description":"","active":false}`), 400, "ROOT_NODE")
		e.expect(e.do("DELETE", cfgPath+"/draft/tree/details/all/"+id+"/root", alice, "", nil), 400, "ROOT_NODE")
	})
}

func TestDraftRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	rules := cfgPath + "/draft/rule/details/m/" + id + "/master,archive"
	order := func() string {
		r := e.get(cfgPath+"/draft/tree/details/m/"+id+"/master,archive", alice)
		var d struct{ Rules []struct{ Name string } }
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range d.Rules {
			names = append(names, r.Name)
		}
		return strings.Join(names, ",")
	}
	rule := func(name string) string {
		return `{"name":"` + name + `","description":"","continue":true,"active":true,"constraint":{"WHERE":{"type":"equal","first":"${event.type}","second":"x"},"WITH":{"v":{"from":"${event.type}","regex":{"type":"Regex","match":"(.*)","group_match_idx":1,"all_matches":false},"modifiers_post":[]}}},"actions":[{"id":"logger","payload":{"v":"${_variables.v}"}}]}`
	}
	e.expect(e.send("POST", rules, alice, rule("a4")), 200, "")
	if got := order(); got != "a1,a2,a3,a4" {
		t.Fatalf("order %s", got)
	}
	r := e.get(rules+"/a4", alice)
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"type":"equals"`) || !strings.Contains(string(r.body), `"type":"Regex"`) {
		t.Errorf("rule in API form: %s", r.body)
	}
	e.expect(e.send("POST", rules, alice, rule("a4")), 409, "VALIDATION_ERROR")
	e.expect(e.send("POST", rules, alice, strings.Replace(rule("bad"), "(.*)", "(", 1)), 409, "VALIDATION_ERROR")
	// A typo that would stay literal text: refused, naming the field.
	r = e.send("POST", rules, alice, strings.Replace(rule("typo"), `"first":"${event.type}"`, `"first":"${event.payload.x"`, 1))
	e.expect(r, 409, "VALIDATION_ERROR")
	if msg := r.json(t)["message"].(string); !strings.Contains(msg, "WHERE.first") || !strings.Contains(msg, "unterminated") {
		t.Errorf("the error does not name the field and the problem: %s", msg)
	}
	e.expect(e.send("POST", cfgPath+"/draft/rule/details/m/"+id+"/master", alice, rule("x")), 400, "NOT_A_RULESET")
	e.expect(e.send("PUT", rules+"/a4", alice, rule("a5")), 200, "")
	e.expect(e.get(rules+"/a4", alice), 404, "RULE_NOT_FOUND")
	e.expect(e.send("PUT", rules+"/a5", alice, rule("a1")), 409, "VALIDATION_ERROR")
	e.expect(e.send("PUT", rules+"/nope", alice, rule("nope")), 404, "RULE_NOT_FOUND")
	move := cfgPath + "/draft/rule/move/m/" + id + "/master,archive"
	e.expect(e.send("PUT", move+"/a5", alice, `{"position": 0}`), 200, "")
	if got := order(); got != "a5,a1,a2,a3" {
		t.Fatalf("order %s", got)
	}
	e.expect(e.send("PUT", move+"/a5", alice, `{"position": "2"}`), 200, "")
	if got := order(); got != "a1,a2,a5,a3" {
		t.Fatalf("order %s", got)
	}
	e.expect(e.send("PUT", move+"/a5", alice, `{"position": 4}`), 400, "POSITION_OUT_OF_RANGE")
	e.expect(e.send("PUT", move+"/a5", alice, `{"position": -1}`), 400, "POSITION_OUT_OF_RANGE")
	e.expect(e.send("PUT", move+"/a5", alice, `{"position": "two"}`), 400, "BAD_REQUEST")
	e.expect(e.send("PUT", move+"/a5", alice, `{}`), 400, "BAD_REQUEST")
	e.expect(e.do("DELETE", rules+"/a5", alice, "", nil), 200, "")
	e.expect(e.do("DELETE", rules+"/a5", alice, "", nil), 404, "RULE_NOT_FOUND")
	if got := order(); got != "a1,a2,a3" {
		t.Fatalf("order %s", got)
	}
}

func multipartBody(t *testing.T, field string, content []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.WriteField("comment", "ignored"); err != nil {
		t.Fatal(err)
	}
	fw, err := w.CreateFormFile(field, "export.json")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	w.Close()
	return buf.Bytes(), w.FormDataContentType()
}

func TestImportExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxImport: 64 << 10})
	id := e.newDraft()
	imp := cfgPath + "/draft/tree/import/m/" + id + "/"
	r := e.get(cfgPath+"/draft/tree/export/m/"+id+"/master", alice)
	e.expect(r, 200, "")
	if cd := r.header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="`) || !strings.Contains(cd, "-master-") {
		t.Errorf("Content-Disposition %q", cd)
	}
	exported := r.body
	// The active tree exports alike, with view and without a draft.
	r = e.get(cfgPath+"/active/tree/export/ro/master", alice)
	e.expect(r, 200, "")
	if !bytes.Equal(r.body, exported) {
		t.Errorf("active export differs from the export of a fresh draft:\n%s\n%s", r.body, exported)
	}
	e.expect(e.get(cfgPath+"/active/tree/export/ro/root", alice), 403, "FORBIDDEN_PATH")
	e.expect(e.get(cfgPath+"/active/tree/export/ro/master,nope", alice), 404, "NODE_NOT_FOUND")
	// Export accepts PUT too (decision 6).
	if r := e.do("PUT", cfgPath+"/draft/tree/export/m/"+id+"/master", alice, "", nil); r.status != 200 || !bytes.Equal(r.body, exported) {
		t.Errorf("PUT export: %d", r.status)
	}
	// Replacing a subtree with its own export changes nothing.
	body, ct := multipartBody(t, "file", exported)
	e.expect(e.do("PUT", imp+"master", alice, ct, body), 200, "")
	if again := e.exportOf(id, "master"); again != string(exported) {
		t.Fatalf("export → import → export differs:\n%s\n%s", exported, again)
	}
	// Import as a child under another name.
	sub := e.exportOf(id, "master,archive")
	body, ct = multipartBody(t, "file", []byte(strings.Replace(sub, `"name": "archive"`, `"name": "archive_copy"`, 1)))
	e.expect(e.do("POST", imp+"master", alice, ct, body), 200, "")
	e.expect(e.get(cfgPath+"/draft/rule/details/m/"+id+"/master,archive_copy/a2", alice), 200, "")
	// Same name again: taken.
	body, ct = multipartBody(t, "file", []byte(sub))
	e.expect(e.do("POST", imp+"master", alice, ct, body), 409, "VALIDATION_ERROR")
	// A nested iterator through import.
	it := `{"version":"1.1","Iterator":{"name":"inner","iterator":{"description":"","active":true,"target":"${event.payload.x}"},"nodes":[]}}`
	body, ct = multipartBody(t, "file", []byte(it))
	e.expect(e.do("POST", imp+"master,alerts", alice, ct, body), 409, "NESTED_ITERATOR_ERROR")
	// Broken files: every refusal's message starts with "import: ".
	importRefused := func(r response, status int, code string) {
		t.Helper()
		e.expect(r, status, code)
		if m, _ := r.json(t)["message"].(string); !strings.HasPrefix(m, "import: ") {
			t.Errorf("%s: message %q does not start with \"import: \"", code, m)
		}
	}
	body, ct = multipartBody(t, "file", []byte(`{"version":"1.1","Ruleset":{"name":"x","rules":[],"extra":1}}`))
	importRefused(e.do("POST", imp+"master", alice, ct, body), 400, "BAD_REQUEST")
	body, ct = multipartBody(t, "other", exported)
	importRefused(e.do("POST", imp+"master", alice, ct, body), 400, "MISSING_FILE")
	importRefused(e.do("POST", imp+"master", alice, "application/json", exported), 415, "UNSUPPORTED_MEDIA_TYPE")
	body, ct = multipartBody(t, "file", bytes.Repeat([]byte(" "), 65<<10))
	e.expect(e.do("POST", imp+"master", alice, ct, body), 413, "PAYLOAD_TOO_LARGE")
	// Replacing the root with a ruleset makes it the root's only child.
	body, ct = multipartBody(t, "file", []byte(sub))
	e.expect(e.do("PUT", cfgPath+"/draft/tree/import/all/"+id+"/root", alice, ct, body), 200, "")
	r = e.get(cfgPath+"/draft/tree/children/all/"+id+"/root", alice)
	if strings.TrimSpace(string(r.body)) != `[{"type":"Ruleset","name":"archive","rules_count":3}]` {
		t.Errorf("after replacing the root: %s", r.body)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	if d := Default(); d.MaxBody != 1<<20 || d.MaxImport != 10<<20 {
		t.Errorf("defaults %+v", d)
	}
	e := newEnv(t, Config{MaxBody: 256})
	id := e.newDraft()
	big := `{"type":"Ruleset","name":"` + strings.Repeat("x", 300) + `"}`
	e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, big), 413, "PAYLOAD_TOO_LARGE")
}

// Two clients editing at once: every edit lands, none is lost.
func TestConcurrentEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			for j := range 10 {
				r := e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, fmt.Sprintf(`{"type":"Ruleset","name":"c%d_%d"}`, i, j))
				if r.status != 200 {
					t.Errorf("edit: %d %s", r.status, r.body)
				}
			}
		})
	}
	wg.Wait()
	r := e.get(cfgPath+"/draft/tree/children/m/"+id+"/master", alice)
	var nodes []map[string]any
	if err := json.Unmarshal(r.body, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 22 {
		t.Errorf("%d children, want 22: %s", len(nodes), r.body)
	}
}

const workedEvent = `{"process_type": "SkipActions", "event": {"type": "alertmanager", "created_ms": 1700000000000, "metadata": {"tenant_id": "master"},
  "payload": {"alerts": [{"name": "DiskFull", "severity": "critical"}, {"name": "CpuHigh", "severity": "warning"}]}}}`

func TestTestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	t.Run("worked example (decision 7: the result starts at the authorization root)", func(t *testing.T) {
		r := e.send("POST", "/api/v2_beta/event/active/ro", alice, workedEvent)
		e.expect(r, 200, "")
		var v any
		json.Unmarshal(r.body, &v)
		got, _ := json.MarshalIndent(v, "", "  ")
		golden(t, "worked_example.golden.json", got)
	})
	t.Run("errors", func(t *testing.T) {
		e.expect(e.send("POST", "/api/v2_beta/event/active/x", alice, workedEvent), 403, "MISSING_REQUIRED_PERMISSIONS")
		e.expect(e.send("POST", "/api/v2_beta/event/active/ro", alice, strings.Replace(workedEvent, "SkipActions", "Full", 1)), 403, "MISSING_REQUIRED_PERMISSIONS")
		e.expect(e.send("POST", "/api/v2_beta/event/active/ro", alice, strings.Replace(workedEvent, "SkipActions", "Sometimes", 1)), 400, "BAD_REQUEST")
		e.expect(e.send("POST", "/api/v2_beta/event/active/ro", alice, `{"process_type":"SkipActions","event":{"type":"x"}}`), 400, "BAD_REQUEST")
		e.expect(e.do("POST", "/api/v2_beta/event/active/ro", alice, "text/plain", []byte(workedEvent)), 415, "UNSUPPORTED_MEDIA_TYPE")
		e.expect(e.send("POST", "/api/v2_beta/event/active/ro", "", workedEvent), 401, "UNAUTHORIZED")
	})
	// The spec: process_type says whether actions are executed "when it
	// is set"; missing (or null) it is SkipActions: view is enough and no
	// action runs.
	t.Run("without process_type is SkipActions", func(t *testing.T) {
		skip := e.send("POST", "/api/v2_beta/event/active/ro", alice, workedEvent)
		e.expect(skip, 200, "")
		for _, body := range []string{
			strings.Replace(workedEvent, `"process_type": "SkipActions", `, "", 1),
			strings.Replace(workedEvent, `"SkipActions"`, "null", 1),
		} {
			r := e.send("POST", "/api/v2_beta/event/active/ro", alice, body)
			e.expect(r, 200, "")
			if !bytes.Equal(r.body, skip.body) {
				t.Errorf("answer differs from SkipActions':\n%s\nwant\n%s", r.body, skip.body)
			}
		}
		before, _ := os.ReadDir(e.archive)
		e.expect(e.send("POST", "/api/v2_beta/event/active/mx", alice, `{"event": {"type": "t", "created_ms": 1, "payload": {"n": 1}}}`), 200, "")
		if after, _ := os.ReadDir(e.archive); len(after) != len(before) {
			t.Errorf("an action ran: %d archive files, were %d", len(after), len(before))
		}
	})
	// The spec: the result's event is "the event as sent": nothing is
	// added (no "metadata": {} when the caller sent none) or dropped.
	t.Run("the event is echoed as sent", func(t *testing.T) {
		for _, ev := range []string{
			`{"type":"x","created_ms":1,"payload":{"a":[1,2.50,"é"]}}`,
			`{"type":"x","created_ms":1,"payload":{},"metadata":{}}`,
			`{"trace_id":"abc","type":"x","created_ms":1,"payload":{"b":{}},"metadata":{"tenant_id":"t"}}`,
		} {
			r := e.send("POST", "/api/v2_beta/event/active/ro", alice, `{"event": `+ev+`}`)
			e.expect(r, 200, "")
			var got struct {
				Event json.RawMessage `json:"event"`
			}
			if err := json.Unmarshal(r.body, &got); err != nil || string(got.Event) != ev {
				t.Errorf("echoed event %s, want %s (%v)", got.Event, ev, err)
			}
		}
	})
	t.Run("Full executes the actions", func(t *testing.T) {
		ev := `{"process_type": "Full", "event": {"type": "t", "created_ms": 1, "metadata": {"tenant_id": "master"}, "payload": {"n": 1}}}`
		e.expect(e.send("POST", "/api/v2_beta/event/active/mx", alice, ev), 200, "")
		entries, err := os.ReadDir(e.archive)
		if err != nil || len(entries) == 0 {
			t.Fatalf("nothing archived: %v", err)
		}
		b, _ := os.ReadFile(filepath.Join(e.archive, entries[0].Name()))
		if !strings.Contains(string(b), `"created_ms":1`) {
			t.Errorf("archive: %s", b)
		}
	})
	t.Run("draft", func(t *testing.T) {
		id := e.newDraft()
		e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, `{"type":"Ruleset","name":"zz"}`), 200, "")
		for _, p := range []string{"/api/v2_beta/event/draft/m/" + id, "/api/v2_beta/event/drafts/m/" + id} {
			r := e.send("POST", p, alice, workedEvent)
			e.expect(r, 200, "")
			if !strings.Contains(string(r.body), `"name":"zz"`) {
				t.Errorf("%s: the draft's new ruleset is not in the result", p)
			}
		}
		// SkipActions reads the draft: view is enough, whoever owns it;
		// Full runs actions of a draft, which only its owner may.
		e.expect(e.send("POST", "/api/v2_beta/event/draft/m/"+id, bob, workedEvent), 200, "")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/ro/"+id, reviewer, workedEvent), 200, "")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/mx/"+id, reviewer, strings.Replace(workedEvent, "SkipActions", "Full", 1)), 403, "NOT_OWNER")
	})
	// The explain extension: with "explain": true the answer also holds
	// the explanation, after the spec's fields; false, null or missing,
	// the answer is byte for byte the one without it.
	t.Run("explain", func(t *testing.T) {
		plain := e.send("POST", "/api/v2_beta/event/active/ro", alice, workedEvent)
		e.expect(plain, 200, "")
		for _, v := range []string{"false", "null"} {
			r := e.send("POST", "/api/v2_beta/event/active/ro", alice, strings.Replace(workedEvent, `{"process_type"`, `{"explain": `+v+`, "process_type"`, 1))
			e.expect(r, 200, "")
			if !bytes.Equal(r.body, plain.body) {
				t.Errorf("explain %s: the answer differs from the one without explain:\n%s", v, r.body)
			}
		}
		r := e.send("POST", "/api/v2_beta/event/active/ro", alice, strings.Replace(workedEvent, `{"process_type"`, `{"explain": true, "process_type"`, 1))
		e.expect(r, 200, "")
		var v, w map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(plain.body, &w); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v["result"], w["result"]) || !bytes.Equal(v["event"], w["event"]) {
			t.Errorf("the result with explain differs from the one without:\n%s", r.body)
		}
		var pretty any
		json.Unmarshal(v["explain"], &pretty)
		got, _ := json.MarshalIndent(pretty, "", "  ")
		golden(t, "worked_example_explain.golden.json", got)

		e.expect(e.send("POST", "/api/v2_beta/event/active/ro", alice, strings.Replace(workedEvent, `{"process_type"`, `{"explain": "yes", "process_type"`, 1)), 400, "BAD_REQUEST")
		id := e.newDraft()
		r = e.send("POST", "/api/v2_beta/event/draft/m/"+id, alice, strings.Replace(workedEvent, `{"process_type"`, `{"explain": true, "process_type"`, 1))
		e.expect(r, 200, "")
		if !strings.Contains(string(r.body), `"explain":{"entries":[{"kind":"filter","path":"master"`) {
			t.Errorf("a draft's test event with explain: %s", r.body)
		}
	})
	// TestTestEvents/draft_Full_owner_or_admin: only the draft's owner or
	// an admin runs the actions of someone else's draft; a scoped editor
	// with test_event_execute_actions is refused.
	t.Run("draft Full owner or admin", func(t *testing.T) {
		id := e.newDraft()
		full := strings.Replace(workedEvent, "SkipActions", "Full", 1)
		e.expect(e.send("POST", "/api/v2_beta/event/draft/mx/"+id, alice, full), 200, "")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/mx/"+id, scopedTester, full), 403, "NOT_OWNER")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/all/"+id, otherAdmin, full), 200, "")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/mx/"+id, scopedTester, workedEvent), 200, "")
		e.expect(e.send("POST", "/api/v2_beta/event/draft/m/nope", alice, workedEvent), 404, "DRAFT_NOT_FOUND")
	})
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldentest.Check(t, filepath.Join("testdata", name), got, *update)
}

// TestUnsupportedActionWarnings: edits, imports and deploys that write an
// action no executor handles succeed (an engine may enable an executor
// this master lacks) with the body null, as every operation whose result
// is "nothing" (decision 9); the warnings naming each such action are in
// the X-Squall-Warnings header and the log.
func TestUnsupportedActionWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	rules := cfgPath + "/draft/rule/details/m/" + id + "/master,archive"
	rule := func(name, actionID string) string {
		return `{"name":"` + name + `","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[{"id":"` + actionID + `","payload":{}}]}`
	}
	warnings := func(r response) []string {
		t.Helper()
		e.expect(r, 200, "")
		if got := strings.TrimSpace(string(r.body)); got != "null" {
			t.Fatalf("body %s, want null", r.body)
		}
		h := r.header.Values(HeaderWarnings)
		if len(h) == 0 {
			return nil
		}
		var w []string
		if err := json.Unmarshal([]byte(h[0]), &w); err != nil || len(h) != 1 {
			t.Fatalf("%s %q: %v", HeaderWarnings, h, err)
		}
		return w
	}
	// e.send goes round the nodes: a follower forwards to the leader,
	// and the header comes back with the answer.
	for i := range 3 {
		if w := warnings(e.send("POST", rules, alice, rule(fmt.Sprintf("plain%d", i), "logger"))); w != nil {
			t.Errorf("node %d: a supported action got warnings %v", i, w)
		}
	}
	w := warnings(e.send("POST", rules, alice, rule("mail", "smtp")))
	if len(w) != 1 || !strings.Contains(w[0], `action "smtp" in ruleset root.master.archive, rule mail`) {
		t.Errorf("warnings %v", w)
	}
	if !strings.Contains(e.logs.String(), `action \"smtp\" in ruleset root.master.archive, rule mail`) {
		t.Errorf("the warning is not in the log:\n%s", e.logs.String())
	}
	if w := warnings(e.send("PUT", rules+"/mail", alice, rule("mail", "icinga2"))); len(w) != 1 || !strings.Contains(w[0], `"icinga2"`) {
		t.Errorf("update: warnings %v", w)
	}
	sub := `{"version":"1.1","Ruleset":{"name":"imported","rules":[` + strings.Replace(rule("d", "director"), `"description":""`, `"description":"x"`, 1) + `]}}`
	body, ct := multipartBody(t, "file", []byte(sub))
	if w := warnings(e.do("POST", cfgPath+"/draft/tree/import/m/"+id+"/master", alice, ct, body)); len(w) != 1 || !strings.Contains(w[0], `"director" in ruleset root.master.imported, rule d`) {
		t.Errorf("import: warnings %v", w)
	}
	if w := warnings(e.send("POST", cfgPath+"/drafts/m/"+id+"/deploy", alice, "")); len(w) != 2 {
		t.Errorf("deploy: warnings %v, want the two actions of the draft", w)
	}
}

// TestAPI_warnCap: X-Squall-Warnings holds at most maxHeaderWarnings
// warnings and then says how many more the log has; the log has them all.
func TestAPI_warnCap(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	a := &API{logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	bad := make([]action.Unsupported, maxHeaderWarnings+5)
	for i := range bad {
		bad[i] = action.Unsupported{ID: fmt.Sprintf("x%d", i), Ruleset: "root.rs", Rule: "r"}
	}
	w := httptest.NewRecorder()
	a.warn(w, httptest.NewRequest("POST", "/p", nil), "alice", bad)
	var got []string
	if err := json.Unmarshal([]byte(w.Header().Get(HeaderWarnings)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != maxHeaderWarnings+1 || !strings.Contains(got[maxHeaderWarnings-1], `"x19"`) || got[maxHeaderWarnings] != "and 5 more (the master's log lists them all)" {
		t.Fatalf("header warnings %q", got)
	}
	if !strings.Contains(logs.String(), `action \"x24\"`) || !strings.Contains(logs.String(), `"user":"alice"`) {
		t.Fatalf("log %s", logs.String())
	}
	w = httptest.NewRecorder()
	a.warn(w, httptest.NewRequest("POST", "/p", nil), "alice", nil)
	if _, ok := w.Header()[HeaderWarnings]; ok {
		t.Fatal("a header without warnings")
	}
}
