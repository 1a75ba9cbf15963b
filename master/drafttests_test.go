package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// alertTree is the root with ruleset rs, whose rule r matches events of
// type typ.
func alertTree(t *testing.T, typ string) *config.Node {
	t.Helper()
	ex, err := config.DecodeExport(fmt.Appendf(nil, `{"version":"1.1","Filter":{"name":"root","filter":{"description":"","active":true,"filter":null},
		"nodes":[{"Ruleset":{"name":"rs","rules":[{"name":"r","description":"","continue":true,"active":true,
		"constraint":{"WHERE":{"type":"equals","first":"${event.type}","second":%q},"WITH":{}},"actions":[]}]}}]}}`, typ))
	if err != nil {
		t.Fatal(err)
	}
	return ex.Node
}

// alertTests is the body of PUT api.DraftTestsPath: one file whose case
// wants rule r to match an event of type alert.
const alertTests = `{"files":[{"name":"alerts.json","content":{"cases":[
	{"name":"alerts match","event":{"type":"alert","created_ms":1,"payload":{}},"match":["root/rs/r"]}]}}]}`

// putTests sends a PUT of the draft's tests through node i.
func putTests(t *testing.T, c *mastertest.Cluster, i int, token, body string) (*http.Response, []byte) {
	t.Helper()
	return do(t, c, i, http.MethodPut, api.DraftTestsPath, token, []byte(body))
}

// stateOf is what a refused deploy must leave as it was: the state
// index, the active tree's index, the versions and the draft.
type stateOf struct {
	index, active uint64
	versions      []store.Version
	draft         *store.Draft
}

func snapshotState(t *testing.T, st *store.Store) stateOf {
	t.Helper()
	d, err := st.Draft()
	if err != nil {
		t.Fatal(err)
	}
	_, active := st.Active()
	return stateOf{index: st.Index(), active: active, versions: st.Versions(), draft: d}
}

// TestDraftTests_DeployGate: tests put on the draft through a follower are
// shown and run against the draft; a deploy whose tests fail is refused
// 422 TESTS_FAILED with the failures, and the active tree, the versions
// and the draft are unchanged; once they pass the deploy records them in
// the version, which shows them, and the next draft starts with them.
// Bad bodies, another user and a scoped token are refused.
func TestDraftTests_DeployGate(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI())
	f := c.Followers()[0]
	deployHTTP(t, c, f, c.AdminToken, "root", draftOf(t, c, "admin", alertTree(t, "alert")), "v1")
	id := draftOf(t, c, "admin", alertTree(t, "alert"))

	for _, tc := range []struct {
		name, body, code, file, field string
	}{
		{"unknown field", `{"files":[],"x":1}`, "BAD_REQUEST", "", ""},
		{"no files", `{}`, "BAD_REQUEST", "", ""},
		{"case without a name", `{"files":[{"name":"a.json","content":{"cases":[{"event":{"type":"x","created_ms":1,"payload":{}},"match":["root/rs/r"]}]}}]}`, "BAD_TEST_FILE", "a.json", "cases[0].name"},
		{"unknown case field", `{"files":[{"name":"b.json","content":{"cases":[{"name":"n","event":{"type":"x","created_ms":1,"payload":{}},"matches":["root/rs/r"]}]}}]}`, "BAD_TEST_FILE", "b.json", "cases[0] (\"n\")"},
		{"two files of one name", `{"files":[{"name":"a.json","content":{"cases":[{"name":"n","event":{"type":"x","created_ms":1,"payload":{}},"match":["root/rs/r"]}]}},{"name":"a.json","content":{"cases":[{"name":"n","event":{"type":"x","created_ms":1,"payload":{}},"match":["root/rs/r"]}]}}]}`, "BAD_TEST_FILE", "a.json", "name"},
		{"bad name", `{"files":[{"name":"../a","content":{"cases":[{"name":"n","event":{"type":"x","created_ms":1,"payload":{}},"match":["root/rs/r"]}]}}]}`, "BAD_REQUEST", "", ""},
	} {
		resp, out := putTests(t, c, f, c.AdminToken, tc.body)
		wantError(t, resp, out, http.StatusBadRequest, tc.code)
		var e apiErr
		_ = json.Unmarshal(out, &e)
		if tc.file != "" && (e.Params["FILE"] != tc.file || e.Params["FIELD"] != tc.field) {
			t.Fatalf("%s: params %v, want FILE %s FIELD %s: %s", tc.name, e.Params, tc.file, tc.field, out)
		}
	}
	other := c.Token(auth.Claims{User: "bob", Auths: map[string]auth.Authorization{"root": {Path: []string{"root"}, Roles: []string{"edit"}}}})
	resp, out := putTests(t, c, f, other, alertTests)
	wantError(t, resp, out, http.StatusForbidden, "NOT_OWNER")
	scoped := c.Token(auth.Claims{User: "admin", Auths: map[string]auth.Authorization{"acme": {Path: []string{"root", "acme"}, Roles: []string{"edit"}}}})
	resp, out = putTests(t, c, f, scoped, alertTests)
	wantError(t, resp, out, http.StatusForbidden, "TESTS_OUT_OF_SCOPE")
	if d, _ := c.Server(c.Leader()).Store().Draft(); len(d.Tests) != 0 {
		t.Fatalf("refused PUTs left tests %+v", d.Tests)
	}

	resp, out = putTests(t, c, f, c.AdminToken, alertTests)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("put tests: %d %s", resp.StatusCode, out)
	}
	view := decode[api.DraftTestsView](t, out)
	if view.Draft != id || view.Cases != 1 || len(view.Files) != 1 || !reflect.DeepEqual(view.Files[0].Cases, []string{"alerts match"}) || view.Tested == "" {
		t.Fatalf("put answer %+v", view)
	}
	resp, out = do(t, c, f, http.MethodGet, api.DraftTestsPath+"?draft="+id, viewToken(c), nil)
	if got := decode[api.DraftTestsView](t, out); resp.StatusCode != http.StatusOK || !reflect.DeepEqual(got, view) {
		t.Fatalf("get tests: %d %s, want %+v", resp.StatusCode, out, view)
	}
	resp, out = do(t, c, f, http.MethodGet, api.DraftTestsPath+"?draft=nope", c.AdminToken, nil)
	wantError(t, resp, out, http.StatusNotFound, "DRAFT_NOT_FOUND")

	// The draft stops matching alerts: the run fails, the deploy is
	// refused and changes nothing.
	onLeaderStore(t, c, func(ctx context.Context, st *store.Store) error {
		return st.EditDraft(ctx, id, "admin", alertTree(t, "page"))
	})
	resp, out = do(t, c, f, http.MethodPost, api.DraftTestsPath+"/run", viewToken(c), nil)
	run := decode[api.TestRun](t, out)
	if resp.StatusCode != http.StatusOK || run.Passed || run.Failed != 1 || run.Cases != 1 ||
		!strings.Contains(run.Files[0].Cases[0].Failures[0].Text, "root/rs/r: match: expected Matched") {
		t.Fatalf("run: %d %s", resp.StatusCode, out)
	}
	before := snapshotState(t, c.Server(c.Leader()).Store())
	resp, out = do(t, c, f, http.MethodPost, fmt.Sprintf("%sconfig/drafts/root/%s/deploy", api.Prefix, id), c.AdminToken, nil)
	wantError(t, resp, out, http.StatusUnprocessableEntity, "TESTS_FAILED")
	var refused struct {
		Params  map[string]string
		Message string
		Details api.TestRun
	}
	if err := json.Unmarshal(out, &refused); err != nil || refused.Params["FAILED"] != "1" || refused.Details.Failed != 1 ||
		!strings.Contains(refused.Message, "alerts.json: alerts match: root/rs/r: match") {
		t.Fatalf("TESTS_FAILED answer %s (%v)", out, err)
	}
	if after := snapshotState(t, c.Server(c.Leader()).Store()); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused deploy changed the state: %+v -> %+v", before, after)
	}

	// Fixed: the deploy records the tests with the version.
	onLeaderStore(t, c, func(ctx context.Context, st *store.Store) error {
		return st.EditDraft(ctx, id, "admin", alertTree(t, "alert"))
	})
	deployHTTP(t, c, f, c.AdminToken, "root", id, "v2")
	vs := listVersions(t, c, f, c.AdminToken)
	if vs[0].Number != 2 || vs[0].TestsHash != view.Tested || vs[1].TestsHash != "" {
		t.Fatalf("versions %+v, want version 2 with tests %s", vs, view.Tested)
	}
	for _, n := range []string{"2", "active"} {
		resp, out = do(t, c, f, http.MethodGet, api.VersionsPath+"/"+n+"/tests", viewToken(c), nil)
		if got := decode[api.VersionTestsView](t, out); resp.StatusCode != http.StatusOK || got.Tested != view.Tested || !reflect.DeepEqual(got.Files, view.Files) {
			t.Fatalf("tests of version %s: %d %s", n, resp.StatusCode, out)
		}
	}
	deleteDraft(t, c, "admin", id)
	id = draftOf(t, c, "admin", alertTree(t, "alert"))
	resp, out = do(t, c, f, http.MethodGet, api.DraftTestsPath, c.AdminToken, nil)
	if got := decode[api.DraftTestsView](t, out); resp.StatusCode != http.StatusOK || got.Draft != id || got.Tested != view.Tested {
		t.Fatalf("a new draft's tests: %d %s", resp.StatusCode, out)
	}
}

// racingStore is the store of a master whose draft is edited by someone
// else between the API's test run and its deploy: the edit is applied
// just before the deploy is submitted.
type racingStore struct {
	*store.Store
	edit func(ctx context.Context, st *store.Store) error
}

func (r racingStore) DeployTested(ctx context.Context, sess *store.Session, id, user string, scope []string, message string, tested store.Tested) (uint64, error) {
	if err := r.edit(ctx, r.Store); err != nil {
		return 0, err
	}
	return r.Store.DeployTested(ctx, sess, id, user, scope, message, tested)
}

// TestDraftTests_ChangedAfterRun: a draft edited after the deploy's tests
// passed and before the deploy applies is not deployed: 409
// DRAFT_CHANGED, the active tree and the versions unchanged, the draft
// holding the edit.
func TestDraftTests_ChangedAfterRun(t *testing.T) {
	t.Parallel()
	var racing atomic.Bool
	edit := func(ctx context.Context, st *store.Store) error {
		if !racing.Load() {
			return nil
		}
		d, err := st.Draft()
		if err != nil {
			return err
		}
		return st.EditDraft(ctx, d.ID, d.Owner, alertTree(t, "page"))
	}
	c := mastertest.TestCluster(t, 3, mastertest.WithSetup(func(_ int, s *master.Server) {
		mountVersionsOver(s, racingStore{s.Store(), edit})
	}))
	id := draftOf(t, c, "admin", alertTree(t, "alert"))
	if resp, out := putTests(t, c, c.Leader(), c.AdminToken, alertTests); resp.StatusCode != http.StatusOK {
		t.Fatalf("put tests: %d %s", resp.StatusCode, out)
	}
	st := c.Server(c.Leader()).Store()
	before := snapshotState(t, st)
	racing.Store(true)
	resp, out := do(t, c, c.Leader(), http.MethodPost, fmt.Sprintf("%sconfig/drafts/root/%s/deploy", api.Prefix, id), c.AdminToken, nil)
	racing.Store(false)
	wantError(t, resp, out, http.StatusConflict, "DRAFT_CHANGED")
	after := snapshotState(t, st)
	if after.active != before.active || len(after.versions) != 0 {
		t.Fatalf("a deploy of a changed draft changed the active tree or the versions: %+v -> %+v", before, after)
	}
	if !config.NodeEqual(after.draft.Tree, alertTree(t, "page")) {
		t.Fatal("the draft lost the edit made during the deploy")
	}
}

// TestDraftTests_FailoverAndRestore: tests attached to the draft and
// kept by a version survive the leader's death (rebuilt from a snapshot)
// and come back with a backup's restore.
func TestDraftTests_FailoverAndRestore(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI())
	id := draftOf(t, c, "admin", alertTree(t, "alert"))
	if resp, out := putTests(t, c, c.Followers()[0], c.AdminToken, alertTests); resp.StatusCode != http.StatusOK {
		t.Fatalf("put tests: %d %s", resp.StatusCode, out)
	}
	deployHTTP(t, c, c.Followers()[0], c.AdminToken, "root", id, "with tests")
	_, want := do(t, c, c.Leader(), http.MethodGet, api.DraftTestsPath, c.AdminToken, nil)
	c.Snapshot(t)
	old := c.Leader()
	c.Kill(old)
	via := c.Followers()[0]
	resp, got := do(t, c, via, http.MethodGet, api.DraftTestsPath, c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK || string(got) != string(want) {
		t.Fatalf("after the leader's death: %d %s, want %s", resp.StatusCode, got, want)
	}
	resp, out := do(t, c, via, http.MethodPost, api.DraftTestsPath+"/run", c.AdminToken, nil)
	if run := decode[api.TestRun](t, out); resp.StatusCode != http.StatusOK || !run.Passed || run.Cases != 1 {
		t.Fatalf("run after the leader's death: %d %s", resp.StatusCode, out)
	}
	c.Restart(old)
	c.WaitConverged()
	if d, err := c.Server(old).Store().Draft(); err != nil || len(d.Tests) != 1 {
		t.Fatalf("the killed leader, restarted: draft %+v %v", d, err)
	}

	resp, backup := do(t, c, via, http.MethodGet, "/squall/v1/backup", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup: %d %s", resp.StatusCode, backup)
	}
	if resp, out := putTests(t, c, via, c.AdminToken, `{"files":[]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("remove tests: %d %s", resp.StatusCode, out)
	}
	resp, out = do(t, c, via, http.MethodPost, "/squall/v1/restore", c.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore: %d %s", resp.StatusCode, out)
	}
	for _, i := range c.Running() {
		mastertest.WaitFor(t, 10*time.Second, func() bool {
			d, err := c.Server(i).Store().Draft()
			tests, _ := c.Server(i).Store().VersionTests(1)
			return err == nil && len(d.Tests) == 1 && len(tests) == 1 && len(c.Server(i).Store().ActiveTests()) == 1
		}, fmt.Sprintf("node %d to hold the backup's tests", i))
	}
}

// TestDraftTests_Level4: while a member runs at feature level 4 the draft
// tests routes are refused with 409 FEATURE_LEVEL naming level 5, and
// deploys work as before.
func TestDraftTests_Level4(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI(), mastertest.WithConfig(func(i int, cfg *master.Config) {
		if i == 2 {
			cfg.StoreOptions = func(sc *store.Config) { sc.FeatureLevel = store.LevelAudit }
		}
	}))
	mastertest.WaitFor(t, 10*time.Second, func() bool {
		return c.Server(c.Leader()).Store().ClusterFeatureLevel() == store.LevelAudit
	}, "the cluster at level 4")
	id := draftOf(t, c, "admin", alertTree(t, "alert"))
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, api.DraftTestsPath, ""},
		{http.MethodPut, api.DraftTestsPath, alertTests},
		{http.MethodPost, api.DraftTestsPath + "/run", ""},
	} {
		var body []byte
		if r.body != "" {
			body = []byte(r.body)
		}
		resp, out := do(t, c, c.Followers()[0], r.method, r.path, c.AdminToken, body)
		wantError(t, resp, out, http.StatusConflict, "FEATURE_LEVEL")
		if !strings.Contains(string(out), `"LEVEL":"5"`) {
			t.Fatalf("%s %s: %s, want the level named", r.method, r.path, out)
		}
	}
	deployHTTP(t, c, c.Followers()[0], c.AdminToken, "root", id, "at level 4")
	if vs := listVersions(t, c, c.Leader(), c.AdminToken); len(vs) != 1 || vs[0].TestsHash != "" {
		t.Fatalf("versions at level 4: %+v", vs)
	}
}
