package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// mountVersionsAPI mounts the configuration API and the versions API, as
// squall master does.
func mountVersionsAPI() mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) { mountVersions(s) })
}

// mountVersions mounts the configuration, versions and draft tests APIs
// on s and returns the API they serve.
func mountVersions(s *master.Server) *api.API { return mountVersionsOver(s, s.Store()) }

// mountVersionsOver is mountVersions with the configuration API over st.
func mountVersionsOver(s *master.Server, st api.Store) *api.API {
	a := api.New(api.Default(), st, s.Verifier(), nil, nil)
	if err := s.Mount(api.Prefix, a.Handler(), master.OnLeader, master.RequestIDs(api.StateWrite)); err != nil {
		panic(err)
	}
	for _, p := range []string{api.VersionsPath, api.VersionsPath + "/"} {
		if err := s.Mount(p, a.VersionsHandler(s.Store()), master.OnLeader, master.RequestIDs()); err != nil {
			panic(err)
		}
	}
	for _, p := range []string{api.DraftTestsPath, api.DraftTestsPath + "/"} {
		if err := s.Mount(p, a.DraftTestsHandler(s.Store()), master.OnLeader, master.RequestIDs()); err != nil {
			panic(err)
		}
	}
	return a
}

// onLeaderStore runs fn on the store of the cluster's leader, again while
// it fails because leadership moved (up to 20 s).
func onLeaderStore(t *testing.T, c *mastertest.Cluster, fn func(ctx context.Context, st *store.Store) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		err := fn(ctx, c.Server(c.Leader()).Store())
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrNotLeader) || ctx.Err() != nil {
			t.Fatal(err)
		}
	}
}

// draftOf makes a draft of owner holding tree, and returns its id.
func draftOf(t *testing.T, c *mastertest.Cluster, owner string, tree *config.Node) string {
	t.Helper()
	var id string
	onLeaderStore(t, c, func(ctx context.Context, st *store.Store) error {
		var err error
		if id, err = st.CreateDraft(ctx, owner); err != nil {
			return err
		}
		return st.EditDraft(ctx, id, owner, tree)
	})
	return id
}

// deployHTTP deploys draft id through node i with token (of the draft's
// owner) under authorization authName.
func deployHTTP(t *testing.T, c *mastertest.Cluster, i int, token, authName, id, message string) {
	t.Helper()
	path := fmt.Sprintf("%sconfig/drafts/%s/%s/deploy?message=%s", api.Prefix, authName, id, url.QueryEscape(message))
	if resp, out := do(t, c, i, http.MethodPost, path, token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("deploy: %d %s", resp.StatusCode, out)
	}
}

// deleteDraft deletes draft id of owner.
func deleteDraft(t *testing.T, c *mastertest.Cluster, owner, id string) {
	t.Helper()
	onLeaderStore(t, c, func(ctx context.Context, st *store.Store) error { return st.DeleteDraft(ctx, nil, id, owner) })
}

func listVersions(t *testing.T, c *mastertest.Cluster, i int, token string) []store.Version {
	t.Helper()
	resp, out := do(t, c, i, http.MethodGet, api.VersionsPath, token, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list versions: %d %s", resp.StatusCode, out)
	}
	return decode[api.VersionList](t, out).Versions
}

// filters returns the root with one filter per name, each holding the
// given children.
func filters(names ...string) *config.Node {
	root := config.NewRoot()
	for _, n := range names {
		root.Children = append(root.Children, &config.Node{Kind: config.KindFilter, Name: n, Active: true})
	}
	return root
}

func errorCode(t *testing.T, out []byte) string {
	t.Helper()
	var e struct{ Code string }
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("error answer %s: %v", out, err)
	}
	return e.Code
}

// TestVersions_FailoverAndRestore: deploys record versions (author, the
// leader's time, message) that every node holds: after the leader is
// killed the new leader lists them and serves their trees; a backup
// holds them, and restoring it brings them back while new numbers keep
// growing. Unknown versions answer 404 and a rollback while a draft
// exists 409, changing nothing.
func TestVersions_FailoverAndRestore(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI())
	f := c.Followers()[0]
	start := time.Now().UnixMilli()
	deployHTTP(t, c, f, c.AdminToken, "root", draftOf(t, c, "admin", filters("a")), "first")
	id := draftOf(t, c, "admin", filters("a", "b"))
	deployHTTP(t, c, f, c.AdminToken, "root", id, "")
	end := time.Now().UnixMilli()

	vs := listVersions(t, c, f, c.AdminToken)
	if got := len(vs); got != 2 {
		t.Fatalf("versions %+v", vs)
	}
	if v := vs[1]; v.Number != 1 || v.Author != "admin" || v.Message != "first" || v.TimeMS < start || v.TimeMS > end || v.Nodes != 2 {
		t.Fatalf("version 1 = %+v (time between %d and %d)", v, start, end)
	}

	// A rollback while the draft exists is refused and changes nothing.
	before := c.Server(c.Leader()).Store().Index()
	resp, out := do(t, c, f, http.MethodPost, api.VersionsPath+"/1/rollback", c.AdminToken, nil)
	if resp.StatusCode != http.StatusConflict || errorCode(t, out) != "DRAFT_EXISTS" {
		t.Fatalf("rollback with a draft: %d %s", resp.StatusCode, out)
	}
	if got := c.Server(c.Leader()).Store().Index(); got != before {
		t.Fatalf("refused rollback moved the state index %d -> %d", before, got)
	}
	deleteDraft(t, c, "admin", id)

	// Snapshots everywhere: the killed leader rebuilds its state from one.
	c.Snapshot(t)
	old := c.Leader()
	c.Kill(old)
	via := c.Followers()[0]
	if got := listVersions(t, c, via, c.AdminToken); !reflect.DeepEqual(got, vs) {
		t.Fatalf("after the leader's death: %+v, want %+v", got, vs)
	}
	resp, out = do(t, c, via, http.MethodGet, api.VersionsPath+"/1", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Squall-Version-Hash") != vs[1].Hash {
		t.Fatalf("version 1: %d %s", resp.StatusCode, out)
	}
	ex, err := config.DecodeExport(out)
	if err != nil || !config.NodeEqual(ex.Node, filters("a")) {
		t.Fatalf("version 1's tree %s: %v", out, err)
	}
	resp, out = do(t, c, via, http.MethodGet, api.VersionsPath+"/1/diff/2", c.AdminToken, nil)
	if d := decode[api.VersionDiff](t, out); resp.StatusCode != http.StatusOK || len(d.Changes) != 1 || d.Changes[0].Path != "root.b" || d.Changes[0].Op != config.ChangeAdded {
		t.Fatalf("diff 1 2: %d %s", resp.StatusCode, out)
	}
	resp, out = do(t, c, via, http.MethodGet, api.VersionsPath+"/99", c.AdminToken, nil)
	if resp.StatusCode != http.StatusNotFound || errorCode(t, out) != "VERSION_NOT_FOUND" {
		t.Fatalf("unknown version: %d %s", resp.StatusCode, out)
	}
	c.Restart(old)
	c.WaitConverged()
	if got := c.Server(old).Store().Versions(); !reflect.DeepEqual(got, vs) {
		t.Fatalf("the killed leader, restarted: %+v, want %+v", got, vs)
	}

	// Backup, two more versions, restore: the backup's versions are back.
	resp, backup := do(t, c, via, http.MethodGet, "/squall/v1/backup", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup: %d %s", resp.StatusCode, backup)
	}
	deployHTTP(t, c, via, c.AdminToken, "root", draftOf(t, c, "admin", filters("c")), "")
	deleteDraft(t, c, "admin", mustDraftID(t, c))
	resp, out = do(t, c, via, http.MethodPost, api.VersionsPath+"/1/rollback?message=undo", c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rollback: %d %s", resp.StatusCode, out)
	}
	if rb := decode[api.RollbackResult](t, out).Version; rb.Number != 4 || rb.RollbackOf != 1 || rb.Message != "undo" || rb.Hash != vs[1].Hash {
		t.Fatalf("rollback made %+v", rb)
	}
	resp, out = do(t, c, via, http.MethodPost, "/squall/v1/restore", c.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore: %d %s", resp.StatusCode, out)
	}
	for _, i := range c.Running() {
		mastertest.WaitFor(t, 10*time.Second, func() bool {
			return reflect.DeepEqual(c.Server(i).Store().Versions(), vs)
		}, fmt.Sprintf("node %d to hold the backup's versions", i))
	}
	deployHTTP(t, c, via, c.AdminToken, "root", draftOf(t, c, "admin", filters("d")), "")
	if n := listVersions(t, c, via, c.AdminToken)[0].Number; n != 5 {
		t.Fatalf("first version after the restore is %d, want 5 (numbers never go back)", n)
	}

	// A rollback sent twice with one idempotency key applies once.
	var answers [2]api.RollbackResult
	for k := range answers {
		out, err := send(t.Context(), c, via, api.VersionsPath+"/1/rollback?force=true", c.AdminToken, "rollback-once")
		if err != nil {
			t.Fatal(err)
		}
		answers[k] = decode[api.RollbackResult](t, out)
	}
	if answers[0].Version.Number != 6 || answers[0].Replayed || !answers[1].Replayed || answers[1].Version.RollbackOf != 1 {
		t.Fatalf("rollback sent twice: %+v", answers)
	}
	if n := listVersions(t, c, via, c.AdminToken)[0].Number; n != 6 {
		t.Fatalf("newest version %d after a rollback sent twice, want 6", n)
	}
}

// leaderStore returns the store of the node that leads now (for
// goroutines, which may not end the test).
func leaderStore(c *mastertest.Cluster) (*store.Store, error) {
	for _, i := range c.Running() {
		if st := c.Server(i).Store(); st.IsLeader() {
			return st, nil
		}
	}
	return nil, store.ErrNotLeader
}

// send POSTs path to node i with an idempotency key (applied once however
// often it is sent), again after a 503 (an election), up to 50 times;
// for goroutines, which may not end the test.
func send(ctx context.Context, c *mastertest.Cluster, i int, path, token, key string) ([]byte, error) {
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(i)+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(master.HeaderIdempotencyKey, key)
		resp, err := calltest.Client().Do(req)
		if err != nil {
			return nil, err
		}
		var body bytes.Buffer
		_, err = io.Copy(&body, resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			return body.Bytes(), nil
		case resp.StatusCode != http.StatusServiceUnavailable || try == 50:
			return nil, fmt.Errorf("%d %s", resp.StatusCode, body.Bytes())
		}
		select {
		case <-time.After(50 * time.Millisecond): // client backoff
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// mustDraftID returns the draft's id.
func mustDraftID(t *testing.T, c *mastertest.Cluster) string {
	t.Helper()
	d, err := c.Server(c.Leader()).Store().Draft()
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

// TestVersions_RollbackLinearizable: deploys and forced rollbacks sent
// concurrently (through different nodes) each take effect once, at one
// point of the log: versions are numbered in log order, every
// acknowledged deploy's version holds the tree its draft had, every
// acknowledged rollback's version holds exactly the tree of the version
// it named, and the active tree on every node is the newest version's.
func TestVersions_RollbackLinearizable(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI())
	deployHTTP(t, c, c.Leader(), c.AdminToken, "root", draftOf(t, c, "admin", filters("v0")), "")

	const deploys, rollbacks = 12, 12
	type deployed struct {
		hash string
		name string
	}
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		acked      []deployed
		rolledBack []store.Version
	)
	wg.Go(func() {
		for k := range deploys {
			name := fmt.Sprintf("d%d", k)
			tree := filters(name)
			err := func() error {
				st, err := leaderStore(c)
				if err != nil {
					return err
				}
				id, err := st.CreateDraft(t.Context(), "admin")
				if err != nil {
					return err
				}
				if err := st.EditDraft(t.Context(), id, "admin", tree); err != nil {
					return err
				}
				path := fmt.Sprintf("%sconfig/drafts/root/%s/deploy?message=%s", api.Prefix, id, name)
				_, err = send(t.Context(), c, k%3, path, c.AdminToken, "deploy-"+name)
				return err
			}()
			if err != nil {
				t.Errorf("deploy %s: %v", name, err)
				return
			}
			h, err := store.TreeHash(tree)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked = append(acked, deployed{hash: h, name: name})
			mu.Unlock()
		}
	})
	wg.Go(func() {
		for k := range rollbacks {
			target := uint64(1 + k%2)
			out, err := send(t.Context(), c, (k+1)%3, fmt.Sprintf("%s/%d/rollback?force=true", api.VersionsPath, target), c.AdminToken, fmt.Sprint("rollback-", k))
			if err != nil {
				t.Errorf("rollback %d: %v", k, err)
				return
			}
			var res api.RollbackResult
			if err := json.Unmarshal(out, &res); err != nil || res.Version.RollbackOf != target {
				t.Errorf("rollback to %d answered %s (%v)", target, out, err)
				return
			}
			mu.Lock()
			rolledBack = append(rolledBack, res.Version)
			mu.Unlock()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}

	vs := c.Server(c.Leader()).Store().Versions()
	slices.Reverse(vs) // oldest first
	if len(vs) != 1+deploys+rollbacks {
		t.Fatalf("%d versions, want %d", len(vs), 1+deploys+rollbacks)
	}
	byNumber := map[uint64]store.Version{}
	for i, v := range vs {
		byNumber[v.Number] = v
		if i > 0 && (v.Number != vs[i-1].Number+1 || v.Index <= vs[i-1].Index) {
			t.Fatalf("version %+v after %+v: numbers and indexes must grow together", v, vs[i-1])
		}
	}
	for _, d := range acked {
		i := slices.IndexFunc(vs, func(v store.Version) bool { return v.Message == d.name })
		if i < 0 || vs[i].Hash != d.hash || vs[i].RollbackOf != 0 {
			t.Fatalf("deploy %s: version %+v, want hash %s", d.name, vs[i], d.hash)
		}
	}
	for _, r := range rolledBack {
		v, ok := byNumber[r.Number]
		if !ok || v.Hash != byNumber[r.RollbackOf].Hash || v.Index != r.Index {
			t.Fatalf("rollback %+v: recorded %+v, the tree of version %d is %s", r, v, r.RollbackOf, byNumber[r.RollbackOf].Hash)
		}
	}
	newest := vs[len(vs)-1]
	c.WaitConverged()
	for _, i := range c.Running() {
		tree, _ := c.Server(i).Store().Active()
		if h, err := store.TreeHash(tree); err != nil || h != newest.Hash {
			t.Fatalf("node %d: active tree hash %s, want the newest version's %s", i, h, newest.Hash)
		}
	}
}

// TestVersions_ScopedRollback: a token scoped to a node (edit) rolls back
// the subtree at its node only: changes deployed elsewhere since stay; it
// is refused (403, nothing changed) when the version's node differs in
// what isolates it, and a view-only token cannot roll back. Its reads of
// a version show its subtree only.
func TestVersions_ScopedRollback(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountVersionsAPI())
	tree := func(team, other string, teamActive bool) *config.Node {
		root := filters("team", "other")
		root.Children[0].Active = teamActive
		root.Children[0].Children = []*config.Node{{Kind: config.KindFilter, Name: team, Active: true}}
		root.Children[1].Children = []*config.Node{{Kind: config.KindFilter, Name: other, Active: true}}
		return root
	}
	teamEdit := c.Token(auth.Claims{User: "tina", Auths: map[string]auth.Authorization{
		"team": {Path: []string{"root", "team"}, Roles: []string{string(auth.Edit)}},
	}})
	teamView := c.Token(auth.Claims{User: "vic", Auths: map[string]auth.Authorization{
		"team": {Path: []string{"root", "team"}, Roles: []string{string(auth.View)}},
	}})
	deploy := func(tr *config.Node) {
		id := draftOf(t, c, "admin", tr)
		deployHTTP(t, c, c.Leader(), c.AdminToken, "root", id, "")
		deleteDraft(t, c, "admin", id)
	}
	deploy(tree("t1", "o1", true))
	deploy(tree("t2", "o2", true))
	f := c.Followers()[0]

	resp, out := do(t, c, f, http.MethodPost, api.VersionsPath+"/1/rollback", teamView, nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("view-only rollback: %d %s", resp.StatusCode, out)
	}
	resp, out = do(t, c, f, http.MethodPost, api.VersionsPath+"/1/rollback", teamEdit, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scoped rollback: %d %s", resp.StatusCode, out)
	}
	active, _ := c.Server(c.Leader()).Store().Active()
	if !config.NodeEqual(active, tree("t1", "o2", true)) {
		t.Fatalf("after the scoped rollback: team %v, other %v", active.Children[0].Children[0].Name, active.Children[1].Children[0].Name)
	}

	deploy(tree("t3", "o2", false)) // version 4: the team node inactive
	deploy(tree("t4", "o2", true))
	before := c.Server(c.Leader()).Store().Index()
	resp, out = do(t, c, f, http.MethodPost, api.VersionsPath+"/4/rollback", teamEdit, nil)
	if resp.StatusCode != http.StatusForbidden || errorCode(t, out) != "ROLLBACK_OUT_OF_SCOPE" {
		t.Fatalf("rollback changing the scope node: %d %s", resp.StatusCode, out)
	}
	if got := c.Server(c.Leader()).Store().Index(); got != before {
		t.Fatalf("refused rollback moved the state index %d -> %d", before, got)
	}

	resp, out = do(t, c, f, http.MethodGet, api.VersionsPath+"/1", teamView, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scoped read: %d %s", resp.StatusCode, out)
	}
	if ex, err := config.DecodeExport(out); err != nil || ex.Node.Name != "team" || ex.Node.Children[0].Name != "t1" {
		t.Fatalf("scoped read of version 1: %s (%v)", out, err)
	}
}

// TestVersions_ListAndRefusals: the list pages newest first with
// next_before; bad parameters, a token with several authorizations and
// no auth parameter, a missing token and an overlong deploy message are
// refused with their codes.
func TestVersions_ListAndRefusals(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1, mountVersionsAPI())
	for k := range 5 {
		id := draftOf(t, c, "admin", filters(fmt.Sprintf("f%d", k)))
		deployHTTP(t, c, 0, c.AdminToken, "root", id, "")
	}
	page := func(query string) api.VersionList {
		t.Helper()
		resp, out := do(t, c, 0, http.MethodGet, api.VersionsPath+query, c.AdminToken, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, resp.StatusCode, out)
		}
		return decode[api.VersionList](t, out)
	}
	var seen []uint64
	query := "?limit=2"
	for range 5 {
		p := page(query)
		for _, v := range p.Versions {
			seen = append(seen, v.Number)
		}
		if p.NextBefore == 0 {
			break
		}
		query = fmt.Sprintf("?limit=2&before=%d", p.NextBefore)
	}
	if !slices.Equal(seen, []uint64{5, 4, 3, 2, 1}) {
		t.Fatalf("pages gave %v", seen)
	}

	two := c.Token(auth.Claims{User: "ann", Auths: map[string]auth.Authorization{
		"a": {Path: []string{"root"}, Roles: []string{string(auth.View)}},
		"b": {Path: []string{"root"}, Roles: []string{string(auth.View)}},
	}})
	long := url.QueryEscape(string(bytes.Repeat([]byte("m"), store.MaxVersionMessage+1)))
	for _, tc := range []struct {
		method, path, token string
		status              int
		code                string
	}{
		{http.MethodGet, api.VersionsPath + "?limit=0", c.AdminToken, http.StatusBadRequest, "BAD_REQUEST"},
		{http.MethodGet, api.VersionsPath + "/x", c.AdminToken, http.StatusBadRequest, "BAD_REQUEST"},
		{http.MethodGet, api.VersionsPath + "/1/diff/nope", c.AdminToken, http.StatusBadRequest, "BAD_REQUEST"},
		{http.MethodPost, api.VersionsPath + "/1/rollback?force=maybe", c.AdminToken, http.StatusBadRequest, "BAD_REQUEST"},
		{http.MethodGet, api.VersionsPath, two, http.StatusBadRequest, "AUTH_REQUIRED"},
		{http.MethodGet, api.VersionsPath, "", http.StatusUnauthorized, "UNAUTHORIZED"},
		{http.MethodGet, api.VersionsPath + "?auth=c", two, http.StatusForbidden, "MISSING_REQUIRED_PERMISSIONS"},
		{http.MethodPost, api.VersionsPath + "/1/rollback?auth=a", two, http.StatusForbidden, "MISSING_REQUIRED_PERMISSIONS"},
		{http.MethodPost, api.Prefix + "config/drafts/root/x/deploy?message=" + long, c.AdminToken, http.StatusBadRequest, "BAD_REQUEST"},
	} {
		resp, out := do(t, c, 0, tc.method, tc.path, tc.token, nil)
		if resp.StatusCode != tc.status || errorCode(t, out) != tc.code {
			t.Errorf("%s %.80s: %d %s, want %d %s", tc.method, tc.path, resp.StatusCode, out, tc.status, tc.code)
		}
	}
	if resp, out := do(t, c, 0, http.MethodGet, api.VersionsPath+"?auth=b", two, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("with auth=b: %d %s", resp.StatusCode, out)
	}
	if n := len(c.Server(0).Store().Versions()); n != 5 {
		t.Fatalf("%d versions after the refusals, want 5", n)
	}
}
