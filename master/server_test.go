package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	valid := func() master.Config {
		c := master.Default()
		c.NodeID, c.DataDir, c.AllowUnsignedTokens = "n1", "/tmp/x", true
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*master.Config)
		want string
	}{
		{"no node id", func(c *master.Config) { c.NodeID = "" }, "node id is required"},
		{"no data dir", func(c *master.Config) { c.DataDir = "" }, "data dir is required"},
		{"bad http address", func(c *master.Config) { c.HTTPAddr = "8080" }, `HTTP address "8080"`},
		{"bad raft advertise", func(c *master.Config) { c.RaftAdvertise = "host:0" }, "raft advertise address"},
		{"bootstrap and join", func(c *master.Config) { c.Bootstrap, c.JoinURLs = true, []string{"http://a:1"} }, "exclude each other"},
		{"bad join URL", func(c *master.Config) { c.JoinURLs = []string{"ftp://a:1"} }, "scheme"},
		{"two token keys", func(c *master.Config) { c.TokenHMACKeyFile, c.TokenEd25519PublicKeyFile = "a", "b" }, "not both"},
		{"no token verification", func(c *master.Config) { c.AllowUnsignedTokens = false }, "allow unsigned tokens"},
		{"half raft TLS", func(c *master.Config) { c.RaftTLS.CertFile = "c.pem" }, "raft TLS"},
		{"negative wait", func(c *master.Config) { c.LeaderWait = -time.Second }, "leader wait is negative"},
		{"negative raft timeout", func(c *master.Config) { c.RaftHeartbeatTimeout = -time.Second }, "raft heartbeat timeout is negative"},
		{"lease above heartbeat", func(c *master.Config) { c.RaftLeaderLeaseTimeout = 2 * time.Second },
			"raft timeouts: leader lease timeout 2s is longer than the heartbeat timeout 600ms"},
		{"election below heartbeat", func(c *master.Config) {
			c.RaftHeartbeatTimeout, c.RaftElectionTimeout = 2*time.Second, time.Second
		}, "election timeout 1s is shorter than the heartbeat timeout 2s"},
		{"heartbeat too short", func(c *master.Config) { c.RaftHeartbeatTimeout = 10 * time.Millisecond }, "heartbeat timeout 10ms is shorter than 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			err := c.Validate()
			var ce *master.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a ConfigError with %q", err, tc.want)
			}
			if _, err := master.New(c); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
	t.Run("key files are read by New", func(t *testing.T) {
		dir := t.TempDir()
		c := valid()
		c.DataDir = dir
		c.TokenHMACKeyFile = filepath.Join(dir, "missing")
		if _, err := master.New(c); err == nil || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("missing HMAC key file: %v", err)
		}
		c.TokenHMACKeyFile = ""
		c.JoinTokenFile = filepath.Join(dir, "join")
		if err := os.WriteFile(c.JoinTokenFile, []byte("short\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := master.New(c); err == nil || !strings.Contains(err.Error(), "at least 16") {
			t.Fatalf("short join token: %v", err)
		}
	})
	// Key files that group or others may read are refused, with the rule
	// and the message of webhook secret files (internal/secretfile).
	for _, tc := range []struct {
		name string
		set  func(c *master.Config, path string)
	}{
		{"token key", func(c *master.Config, p string) { c.TokenHMACKeyFile = p }},
		{"join token", func(c *master.Config, p string) { c.JoinTokenFile = p }},
	} {
		t.Run(tc.name+" readable by others", func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "key")
			content := strings.Repeat("ab", 32) + "\n"
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
			c := valid()
			c.DataDir = dir
			tc.set(&c, path)
			want := "readable by group or others (mode 0644): make it readable by its owner only: chmod 600 " + path
			if _, err := master.New(c); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("New = %v, want %q", err, want)
			}
			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := master.New(c)
			if err != nil {
				t.Fatalf("New with mode 0600: %v", err)
			}
			_ = s.Shutdown(t.Context())
		})
	}
}

// newServer returns a master that is not started, to mount handlers on.
func newServer(t *testing.T) *master.Server {
	t.Helper()
	c := master.Default()
	c.NodeID, c.DataDir, c.AllowUnsignedTokens = "n1", t.TempDir(), true
	s, err := master.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
	return s
}

func TestServer_Mount(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if err := s.Mount("/api/v2_beta/", ok, master.OnLeader); err != nil {
		t.Fatal(err)
	}
	if err := s.Mount("/intel/api/sdk/v0/", ok, master.OnLeader); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pattern string
		p       master.Placement
		want    string
	}{
		{"/api/v2_beta/", master.OnAnyNode, "conflicts"},
		{"GET /squall/v1/cluster", master.OnAnyNode, "conflicts"},
		{"BAD PATTERN WITH SPACES", master.OnAnyNode, "mount"},
		{"/x/", master.Placement(9), "unknown placement"},
	} {
		if err := s.Mount(tc.pattern, ok, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Mount(%q): %v, want %q", tc.pattern, err, tc.want)
		}
	}
}

// TestServer_AddReadyCheck: /readyz answers 503 naming the failing check
// until every added check passes; checks cannot be added once started.
func TestServer_AddReadyCheck(t *testing.T) {
	t.Parallel()
	var engineUp atomic.Bool
	c := mastertest.TestCluster(t, 1, mastertest.WithSetup(func(_ int, s *master.Server) {
		if err := s.AddReadyCheck("engine", func() error {
			if !engineUp.Load() {
				return errors.New("no tree installed")
			}
			return nil
		}); err != nil {
			panic(err)
		}
		if err := s.AddReadyCheck("", nil); err == nil {
			panic("a nameless check was accepted")
		}
	}))
	resp, body := c.Get(0, "/readyz", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "NOT_READY")
	if e := decode[apiErr](t, body); e.Params["CHECK"] != "engine" || !strings.Contains(e.Message, "engine: no tree installed") {
		t.Errorf("readyz body %s", body)
	}
	if resp.Header.Get("Retry-After") != "1" {
		t.Errorf("readyz 503 without Retry-After: %v", resp.Header)
	}
	// Probes ask every few seconds while a node starts: a not-ready
	// answer is logged at debug, not as a failed request.
	for _, line := range strings.Split(c.Log(0), "\n") {
		if strings.Contains(line, "/readyz") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("a /readyz answer logged above debug: %s", line)
		}
	}
	engineUp.Store(true)
	if resp, body = c.Get(0, "/readyz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz with every check passing: %d %s", resp.StatusCode, body)
	}
	if err := c.Server(0).AddReadyCheck("late", func() error { return nil }); err == nil {
		t.Error("a check was added to a started server")
	}
}

// TestServer_SingleNode covers one node: probes, metrics, the cluster
// endpoint, JSON errors, and a mounted route served locally.
func TestServer_SingleNode(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1, mountTestAPI())
	srv := c.Server(0)

	resp, body := c.Get(0, "/healthz", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	resp, body = c.Get(0, "/readyz", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %d %s", resp.StatusCode, body)
	}

	idx := appendVia(t, c, 0, "one")
	resp, body = c.Get(0, "/squall/v1/cluster", c.AdminToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cluster: %d %s", resp.StatusCode, body)
	}
	info := decode[master.ClusterInfo](t, body)
	if info.NodeID != "node0" || info.LeaderID != "node0" || info.State != "Leader" || info.Term == 0 ||
		info.CommitIndex < idx || info.AppliedIndex == 0 || info.AppliedIndex > info.CommitIndex ||
		info.StateIndex < idx || info.ActiveIndex != idx || len(info.Members) != 1 {
		// raft's own applied index may trail its commit index for a moment
		// after an Apply returned; the state's index may not.
		t.Fatalf("cluster info %+v", info)
	}
	m := info.Members[0]
	if m != (master.MemberInfo{ID: "node0", RaftAddr: srv.RaftAddr(), HTTPAddr: srv.HTTPAddr(), Suffrage: "voter", Leader: true,
		FeatureLevel: store.FeatureLevel}) || info.FeatureLevel != store.FeatureLevel {
		t.Fatalf("member %+v", m)
	}

	resp, body = c.Get(0, "/metrics", "")
	for _, want := range []string{
		"squall_store_apply_duration_seconds", "squall_store_raft_leader 1", fmt.Sprintf("squall_store_cluster_feature_level %d", store.FeatureLevel),
		`squall_master_http_requests_total{code="200",method="POST",route="/api/v2_beta/test/"}`,
		"squall_master_http_request_duration_seconds_bucket",
	} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	resp, body = c.Get(0, "/squall/v1/nope", "")
	wantError(t, resp, body, http.StatusNotFound, "NOT_FOUND")
	resp, body = c.Do(0, http.MethodPut, "/squall/v1/cluster", c.AdminToken, nil)
	wantError(t, resp, body, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("405 without Allow: %q", allow)
	}
}

// TestServer_Auth checks the tokens of the master's own endpoints.
func TestServer_Auth(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
		code                      string
	}{
		{"cluster without token", "GET", "/squall/v1/cluster", "", 401, "UNAUTHORIZED"},
		{"cluster with a garbage token", "GET", "/squall/v1/cluster", "abc.def.ghi", 401, "UNAUTHORIZED"},
		{"cluster below root", "GET", "/squall/v1/cluster", tenantAdminToken(c), 403, "FORBIDDEN"},
		{"cluster with view", "GET", "/squall/v1/cluster", viewToken(c), 200, ""},
		{"watch without token", "GET", "/squall/v1/tree/active", "", 401, "UNAUTHORIZED"},
		{"watch below root", "GET", "/squall/v1/tree/active", tenantAdminToken(c), 403, "FORBIDDEN"},
		{"remove without token", "DELETE", "/squall/v1/cluster/members/node9", "", 401, "UNAUTHORIZED"},
		{"remove with view", "DELETE", "/squall/v1/cluster/members/node9", viewToken(c), 403, "FORBIDDEN"},
		{"remove below root", "DELETE", "/squall/v1/cluster/members/node9", tenantAdminToken(c), 403, "FORBIDDEN"},
		{"remove an unknown member", "DELETE", "/squall/v1/cluster/members/node9", c.AdminToken, 404, "MEMBER_NOT_FOUND"},
		{"backup with view", "GET", "/squall/v1/backup", viewToken(c), 403, "FORBIDDEN"},
		{"restore without token", "POST", "/squall/v1/restore", "", 401, "UNAUTHORIZED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := c.Do(0, tc.method, tc.path, tc.token, nil)
			if tc.code == "" {
				if resp.StatusCode != tc.status {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				return
			}
			wantError(t, resp, body, tc.status, tc.code)
		})
	}
}

// TestServer_Join checks the join endpoint's token and body.
func TestServer_Join(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	join := func(token, body string) (*http.Response, []byte) {
		return postJoin(t, c.URL(0), token, body)
	}
	good := `{"id":"x","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`
	resp, body := join("", good)
	wantError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
	resp, body = join(c.JoinToken()+"x", good)
	wantError(t, resp, body, http.StatusForbidden, "FORBIDDEN")
	for _, bad := range []string{
		`{"id":"x","raft_addr":"127.0.0.1:1"}`,
		`{"id":"","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`,
		`{"id":"x","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2","extra":1}`,
		`not json`,
	} {
		resp, body = join(c.JoinToken(), bad)
		wantError(t, resp, body, http.StatusBadRequest, "BAD_REQUEST")
	}
	// A raft address nobody listens on is refused before it becomes a
	// voter (a 502 the joining node retries).
	resp, body = join(c.JoinToken(), good)
	wantError(t, resp, body, http.StatusBadGateway, "NODE_UNREACHABLE")
	if ids := memberIDs(t, c, 0); len(ids) != 1 {
		t.Fatalf("members after refused joins: %v", ids)
	}
	if addr := c.Server(0).Store().HTTPAddr("x"); addr != "" {
		t.Fatalf("a failed join left its HTTP address: %s", addr)
	}

	// A node with the wrong join token fails: Err reports the refusal.
	dir := t.TempDir()
	wrong := filetest.Write(t, dir, "join", "0123456789abcdef-wrong")
	cfg := master.Default()
	cfg.NodeID, cfg.DataDir, cfg.AllowUnsignedTokens = "intruder", dir, true
	cfg.HTTPAddr, cfg.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.JoinURLs, cfg.JoinTokenFile = []string{c.URL(0)}, wrong
	s, err := master.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = s.Run(ctx)
	var refused *master.JoinRefusedError
	if !errors.As(err, &refused) || refused.Status != http.StatusForbidden {
		t.Fatalf("Run with a wrong join token: %v", err)
	}
}

func memberIDs(t *testing.T, c *mastertest.Cluster, i int) []string {
	t.Helper()
	st, err := c.Server(i).Store().Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range st.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestServer_Watch covers the tree watch: at once without index, on a
// deploy, at the deadline, and bad parameters.
func TestServer_Watch(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3)
	leader := c.Server(c.Leader())
	f := c.Followers()[0]
	tok := viewToken(c)

	resp, body := c.Get(f, "/squall/v1/tree/active", tok)
	first := decode[master.TreeAnswer](t, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(master.HeaderIndex) != "0" || first.Index != 0 || !strings.Contains(string(first.Tree), `"name":"root"`) {
		t.Fatalf("watch without index: %d %s", resp.StatusCode, body)
	}

	type answer struct {
		resp *http.Response
		body []byte
		took time.Duration
	}
	watch := func(query string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			start := time.Now()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.URL(f)+"/squall/v1/tree/active?"+query, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := calltest.Client().Do(req)
			if err != nil {
				ch <- answer{}
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			ch <- answer{resp, buf.Bytes(), time.Since(start)}
		}()
		return ch
	}

	t.Run("returns on deploy", func(t *testing.T) {
		ch := watch("index=0&wait=30s")
		ctx := t.Context()
		id, err := leader.Store().CreateDraft(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		tree, _ := leader.Store().Active()
		tree.Description = "deployed"
		if err := leader.Store().EditDraft(ctx, id, "alice", tree); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-ch:
			t.Fatalf("the watch returned before the deploy: %+v %s", a.resp, a.body)
		default:
		}
		idx, err := leader.Store().Deploy(ctx, id, "alice")
		if err != nil {
			t.Fatal(err)
		}
		a := <-ch
		if a.resp == nil || a.resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %+v %s", a.resp, a.body)
		}
		got := decode[master.TreeAnswer](t, a.body)
		if got.Index != idx || !strings.Contains(string(got.Tree), `"deployed"`) {
			t.Fatalf("watch answer %s, want index %d", a.body, idx)
		}
	})

	t.Run("returns at the deadline", func(t *testing.T) {
		_, idx := leader.Store().Active()
		a := <-watch("wait=300ms&index=" + itoa(idx))
		if a.resp == nil || a.resp.StatusCode != http.StatusOK || a.took < 300*time.Millisecond {
			t.Fatalf("watch: %+v %s after %s", a.resp, a.body, a.took)
		}
		if got := decode[master.TreeAnswer](t, a.body); got.Index != idx {
			t.Fatalf("index %d, want %d", got.Index, idx)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, q := range []string{"index=-1", "index=x", "wait=soon", "wait=-1s"} {
			resp, body := c.Get(f, "/squall/v1/tree/active?"+q, tok)
			wantError(t, resp, body, http.StatusBadRequest, "BAD_REQUEST")
		}
	})
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestServer_BackupRestore is the documented backup and restore
// procedure: GET /squall/v1/backup from any node, POST /squall/v1/restore
// to any node of the same or a new cluster.
func TestServer_BackupRestore(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 3, mountTestAPI())
	f := c.Followers()[0]
	appendVia(t, c, f, "a")
	appendVia(t, c, f, "b")
	leader := c.Server(c.Leader()).Store()
	draftID, err := leader.CreateDraft(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}

	resp, backup := c.Get(f, "/squall/v1/backup", c.AdminToken)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "squall-backup-") {
		t.Fatalf("backup: %d %s", resp.StatusCode, backup)
	}
	b, err := store.DecodeBackup(bytes.NewReader(backup))
	if err != nil || b.Draft == nil || b.Draft.ID != draftID {
		t.Fatalf("backup file: %v %+v", err, b)
	}

	appendVia(t, c, f, "after")
	resp, body := c.Do(f, http.MethodPost, "/squall/v1/restore", c.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore: %d %s", resp.StatusCode, body)
	}
	idx := decode[master.RestoreResult](t, body).Index
	mastertest.WaitFor(t, 5*time.Second, func() bool {
		for _, i := range c.Running() {
			if _, ai := c.Server(i).Store().Active(); ai != idx {
				return false
			}
		}
		return true
	}, "every node to apply the restore")
	for _, i := range c.Running() {
		if got := strings.Join(childNames(c, i), ","); got != "a,b" {
			t.Fatalf("node %d after restore: %s", i, got)
		}
	}

	// Into a new cluster (disaster recovery): the same file.
	other := mastertest.TestCluster(t, 1)
	resp, body = other.Do(0, http.MethodPost, "/squall/v1/restore", other.AdminToken, backup)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restore into a new cluster: %d %s", resp.StatusCode, body)
	}
	if d, err := other.Server(0).Store().Draft(); err != nil || d.ID != draftID || d.Owner != "alice" {
		t.Fatalf("restored draft %+v %v", d, err)
	}

	resp, body = c.Do(f, http.MethodPost, "/squall/v1/restore", c.AdminToken, []byte(`{"format":1}`))
	wantError(t, resp, body, http.StatusBadRequest, "BAD_REQUEST")
	bad := strings.Replace(string(backup), `"name":"a"`, `"name":"not valid"`, 1)
	resp, body = c.Do(f, http.MethodPost, "/squall/v1/restore", c.AdminToken, []byte(bad))
	wantError(t, resp, body, http.StatusConflict, "VALIDATION_ERROR")
}

// TestServer_MountedRoutes: a request to a mounted handler is served with
// the handler, pattern and path values ServeMux gives it, whether its
// pattern has wildcards (matched again by the mux), is a prefix route
// (served without asking the mux) or neither, and redirects of paths to
// clean are the mux's.
func TestServer_MountedRoutes(t *testing.T) {
	t.Parallel()
	requests := []struct{ method, target string }{
		{http.MethodGet, "/a/"},
		{http.MethodPost, "/a/x/y"},
		{http.MethodGet, "/a/x/../y"},
		{http.MethodGet, "/a/x/./y"},
		{http.MethodGet, "/a/x/."},
		{http.MethodGet, "/a/x/.."},
		{http.MethodGet, "/a//y"},
		{http.MethodGet, "/a"},
		{http.MethodGet, "/a/%2e%2e/y"},
		{http.MethodGet, "/a/x%2Fy"},
		{http.MethodGet, "/a%2Fx/y"},
		{http.MethodGet, "http://example.com/e/x"},
		{http.MethodGet, "/%61/x"},
		{http.MethodGet, "/a/x?q=1"},
		{http.MethodGet, "http://example.com/a/x"},
		{http.MethodGet, "http://other.example/e/x"},
		{http.MethodGet, "/b/7/r/s"},
		{http.MethodGet, "/b/%2F7/r%2Fs"},
		{http.MethodHead, "/b/7/r"},
		{http.MethodPut, "/c/x"},
		{http.MethodPut, "/c/%78"},
		{http.MethodGet, "/d/"},
		{http.MethodGet, "/e/x"},
		{http.MethodPost, "/e/x"},
		{http.MethodGet, "/e/y"},
		{http.MethodGet, "/pa/x"},
		{http.MethodGet, "/p%2561/x"},
		{http.MethodGet, "/h/x"},
		{http.MethodConnect, "/a/x"},
	}
	for _, patterns := range [][]string{
		{"/a/", "GET /b/{id}/{rest...}", "PUT /c/x", "/d/{$}", "/e/", "GET /e/x", "/p%61/"},
		// A host's pattern: no prefix route.
		{"/a/", "example.com/", "/e/", "/h/", "/"},
	} {
		s := newServer(t)
		ref := http.NewServeMux()
		for _, p := range patterns {
			echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Pattern", r.Pattern)
				_, _ = w.Write([]byte(p + ": " + r.Method + " " + r.URL.Path + " id=" + r.PathValue("id") + " rest=" + r.PathValue("rest")))
			})
			if err := s.Mount(p, echo, master.OnAnyNode); err != nil {
				t.Fatal(err)
			}
			ref.Handle(p, echo)
		}
		h := s.Handler()
		for _, tc := range requests {
			serve := func(h http.Handler) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
				return w
			}
			got, want := serve(h), serve(ref)
			if want.Code == http.StatusNotFound || want.Code == http.StatusMethodNotAllowed {
				// The server answers these in JSON.
				if got.Code != want.Code {
					t.Errorf("%v: %s %s: %d %q, want %d", patterns, tc.method, tc.target, got.Code, got.Body, want.Code)
				}
				continue
			}
			if got.Code != want.Code || got.Body.String() != want.Body.String() ||
				got.Header().Get("X-Pattern") != want.Header().Get("X-Pattern") || got.Header().Get("Location") != want.Header().Get("Location") {
				t.Errorf("%v: %s %s: %d %v %q, want %d %v %q", patterns, tc.method, tc.target, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}
