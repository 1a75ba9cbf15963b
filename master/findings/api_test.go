package findings_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// env is the findings API mounted on every node of a 3-node cluster, with
// one clock (Unix seconds) shared by all nodes.
type env struct {
	c     *mastertest.Cluster
	clock atomic.Int64
	logs  logtest.Buffer
	// tokA and tokB are tokens of tenants a and b (tenant claim); specA is
	// a spec-format token scoped to [root, a] with edit; noTenant spans two
	// tenants. noRoles is the spec's token for [root, a] with roles [];
	// viewA has view, writerA findings_write, on [root, a]; viewB has view
	// on [root, b] and tenant claim a.
	tokA, tokB, specA, noTenant, noRoles, viewA, writerA, viewB string
}

func newEnv(t *testing.T, opts ...mastertest.Option) *env {
	t.Helper()
	e := &env{}
	e.clock.Store(1_700_000_000)
	logger := slog.New(slog.NewJSONHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.c = mastertest.TestCluster(t, 3, append(opts, mastertest.WithSetup(func(_ int, s *master.Server) {
		cfg := findings.Default()
		cfg.Now = func() time.Time { return time.Unix(e.clock.Load(), 0) }
		a := findings.New(cfg, s.Store(), s.Verifier(), logger)
		if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeaderWrite, master.IdempotentMethods(http.MethodPut), master.RequestIDs()); err != nil {
			t.Fatal(err)
		}
	}))...)
	e.tokA = e.c.Token(auth.FindingsClaims("ingest", "a", auth.FindingsRead, auth.FindingsWrite))
	e.tokB = e.c.Token(auth.FindingsClaims("ingest", "b", auth.FindingsRead, auth.FindingsWrite))
	e.noTenant = e.c.Token(auth.Claims{User: "ingest", Auths: map[string]auth.Authorization{
		"a": {Path: []string{"root", "a"}, Roles: []string{"view"}}, "b": {Path: []string{"root", "b"}, Roles: []string{"view"}},
	}})
	// A token in the spec's format: no tenant claim, every path below
	// tenant a's node (decision 17).
	e.specA = e.c.Token(auth.Claims{User: "ingest", Auths: map[string]auth.Authorization{
		"a": {Path: []string{"root", "a"}, Roles: []string{"edit"}},
	}})
	spec := func(tenant string, roles ...string) auth.Claims {
		return auth.Claims{User: "ingest", Auths: map[string]auth.Authorization{"x": {Path: []string{"root", tenant}, Roles: roles}}}
	}
	e.noRoles = e.c.Token(spec("a"))
	e.viewA = e.c.Token(spec("a", "view"))
	e.writerA = e.c.Token(spec("a", "findings_write"))
	b := spec("b", "view")
	b.Tenant = "a"
	e.viewB = e.c.Token(b)
	return e
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errCode returns the code and FIELD param of an error answer.
func (r reply) errCode(t *testing.T) (code, field string) {
	t.Helper()
	var e struct {
		Code    string            `json:"code"`
		Params  map[string]string `json:"params"`
		Message string            `json:"message"`
	}
	r.decode(t, &e)
	if e.Params == nil || e.Message == "" {
		t.Fatalf("error answer without params or message: %s", r.body)
	}
	return e.Code, e.Params["FIELD"]
}

// do sends a request to node i. ct "" means application/json when there
// is a body. hdr are extra header names and values.
func (e *env) do(t *testing.T, i int, method, path, token, ct, body string, hdr ...string) reply {
	t.Helper()
	r, err := e.send(t, i, method, path, token, ct, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is do for other goroutines than the test's: it returns its error.
func (e *env) send(t *testing.T, i int, method, path, token, ct, body string, hdr ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		if ct == "" {
			ct = "application/json"
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.c.URL(i)+"/intel/api/sdk/v0"+path, rd)
	if err != nil {
		return reply{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k := 0; k+1 < len(hdr); k += 2 {
		req.Header.Set(hdr[k], hdr[k+1])
	}
	resp, err := calltest.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func credential(n int) string {
	return fmt.Sprintf(`{"monitored_domain_id": %d, "tool_code": "%s", "resource_url": "https://Login.Example.com/auth",
		"username": "user%d@example.com", "password": "pw%d", "hash": "%064x", "hash_algorithm": "SHA-256"}`,
		1+n%3, []string{"leakmon", "scanner"}[n%2], n, n, n)
}

// insert inserts credential(n) for token through node i and returns the uid.
func (e *env) insert(t *testing.T, i int, token string, n int, wantStatus int) string {
	t.Helper()
	r := e.do(t, i, "PUT", "/findings/credentials", token, "", credential(n))
	if r.status != wantStatus {
		t.Fatalf("insert %d: %d %s, want %d", n, r.status, r.body, wantStatus)
	}
	var u struct{ UID string }
	r.decode(t, &u)
	if u.UID == "" {
		t.Fatalf("insert %d: no uid in %s", n, r.body)
	}
	return u.UID
}

type envelope struct {
	Total    int              `json:"total"`
	Page     int              `json:"page"`
	Limit    int              `json:"limit"`
	Findings []map[string]any `json:"findings"`
}

func TestAPI(t *testing.T) {
	e := newEnv(t)
	leader := e.c.Leader()
	follower := e.c.Followers()[0]

	var uid0 string
	t.Run("insert and get", func(t *testing.T) {
		// Through a follower: forwarded to the leader.
		first := e.do(t, follower, "PUT", "/findings/credentials", e.tokA, "", credential(0))
		var created struct{ UID string }
		first.decode(t, &created)
		if uid0 = created.UID; first.status != http.StatusCreated || uid0 == "" || first.header.Get(findings.HeaderDuplicate) != "" {
			t.Fatalf("first insert: %d %s, %s %q", first.status, first.body, findings.HeaderDuplicate, first.header.Get(findings.HeaderDuplicate))
		}
		// The same credential again is the same finding: the spec's one
		// success status, 201, with the same uid, and a header saying it
		// was a repeat (the first insert's answer has none).
		e.clock.Add(5)
		r := e.do(t, leader, "PUT", "/findings/credentials", e.tokA, "", credential(0))
		var u struct{ UID string }
		r.decode(t, &u)
		if r.status != http.StatusCreated || u.UID != uid0 || r.header.Get(findings.HeaderDuplicate) != "true" {
			t.Fatalf("repeat: %d %s %s=%q, want 201 uid %s and %[3]s=true", r.status, r.body, findings.HeaderDuplicate, r.header.Get(findings.HeaderDuplicate), uid0)
		}
		// A spec-format token scoped to tenant a's node is tenant a's.
		if again := e.insert(t, follower, e.specA, 0, http.StatusCreated); again != uid0 {
			t.Fatalf("the spec-format token's insert got uid %s, want tenant a's %s", again, uid0)
		}
		// findings_write alone inserts; view alone reads (decision 8).
		if again := e.insert(t, follower, e.writerA, 0, http.StatusCreated); again != uid0 {
			t.Fatalf("the findings writer's insert got uid %s, want %s", again, uid0)
		}
		if r := e.do(t, follower, "GET", "/finding/"+uid0, e.viewA, "", ""); r.status != http.StatusOK {
			t.Fatalf("get with view: %d %s", r.status, r.body)
		}
		r = e.do(t, follower, "GET", "/finding/"+uid0, e.tokA, "", "", "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		if r.status != http.StatusOK {
			t.Fatalf("get: %d %s", r.status, r.body)
		}
		var got map[string]any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"total": 1.0, "page": 1.0, "limit": 1.0,
			"findings": []any{map[string]any{
				"uid": uid0, "identifier": uid0, "finding_type": "credential",
				// The spec's Integer ids: the first tool and the first
				// tenant of the cluster.
				"tool":             map[string]any{"name": "leakmon", "id": 1.0},
				"organization":     map[string]any{"name": "a", "id": 1.0},
				"monitored_domain": map[string]any{"name": "domain-1", "id": 1.0},
				"hostname":         map[string]any{"data": "login.example.com", "uid": nil},
				"ipv4_address":     nil, "port": nil, "severity": nil, "ticket": nil, "priority": nil,
				"discovery_date": 1_700_000_000.0, "state": "Unassigned",
				"username": "user0@example.com", "plain_text": "pw0", "hash_algorithm": "SHA-256",
				"hash": fmt.Sprintf("%064x", 0), "email_address": "user0@example.com",
				"resource": "https://login.example.com/auth/",
			}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %v\nwant %v", got, want)
		}
		if logs := e.logs.String(); !strings.Contains(logs, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
			t.Fatalf("trace id not in the logs:\n%s", logs)
		}
	})

	t.Run("email address only for e-mail usernames", func(t *testing.T) {
		body := `{"monitored_domain_id": 7, "tool_code": "t", "resource_url": "http://h.example/", "username": "bob", "password": "x"}`
		r := e.do(t, leader, "PUT", "/findings/credentials", e.tokA, "", body)
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var u struct{ UID string }
		r.decode(t, &u)
		var env envelope
		e.do(t, leader, "GET", "/finding/"+u.UID, e.tokA, "", "").decode(t, &env)
		f := env.Findings[0]
		// The spec types email_address String: "" (not null) for a
		// username that is not an e-mail address.
		if f["email_address"] != "" || f["hash"] != "" || f["hash_algorithm"] != "" || f["resource"] != "http://h.example/" {
			t.Fatalf("finding %v", f)
		}
	})

	t.Run("tenant isolation", func(t *testing.T) {
		// Tenant b neither sees, counts, patches nor dedups against a.
		if r := e.do(t, leader, "GET", "/finding/"+uid0, e.tokB, "", ""); r.status != http.StatusNotFound {
			t.Fatalf("get of another tenant's finding: %d %s", r.status, r.body)
		}
		if r := e.do(t, follower, "PATCH", "/finding/"+uid0, e.tokB, "", `{"state": "Resolved"}`); r.status != http.StatusNotFound {
			t.Fatalf("patch of another tenant's finding: %d %s", r.status, r.body)
		}
		var env envelope
		e.do(t, leader, "GET", "/findings/credential", e.tokB, "", "").decode(t, &env)
		if env.Total != 0 || len(env.Findings) != 0 {
			t.Fatalf("tenant b lists %+v", env)
		}
		var before envelope
		e.do(t, follower, "GET", "/findings/credential", e.tokA, "", "").decode(t, &before)
		uidB := e.insert(t, leader, e.tokB, 0, http.StatusCreated)
		if uidB == uid0 {
			t.Fatal("tenant b deduplicated against tenant a")
		}
		// Counts are per tenant: b's insert counts for b only.
		var after, ofB envelope
		e.do(t, follower, "GET", "/findings/credential", e.tokA, "", "").decode(t, &after)
		e.do(t, leader, "GET", "/findings/credential", e.tokB, "", "").decode(t, &ofB)
		if after.Total != before.Total || ofB.Total != 1 || ofB.Findings[0]["uid"] != uidB {
			t.Fatalf("totals: a %d -> %d, b %d %v", before.Total, after.Total, ofB.Total, ofB.Findings)
		}
		if r := e.do(t, leader, "GET", "/finding/"+uidB, e.tokA, "", ""); r.status != http.StatusNotFound {
			t.Fatalf("a gets b's finding: %d %s", r.status, r.body)
		}
		var ga envelope
		e.do(t, leader, "GET", "/finding/"+uidB, e.tokB, "", "").decode(t, &ga)
		if ga.Findings[0]["organization"].(map[string]any)["name"] != "b" {
			t.Fatalf("organization %v", ga.Findings[0]["organization"])
		}
	})

	t.Run("patch", func(t *testing.T) {
		r := e.do(t, follower, "PATCH", "/finding/"+uid0, e.tokA, "", `{"state": "InProgress", "ticket": "SEC-42", "priority": "High", "severity": "Critical"}`)
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var env envelope
		r.decode(t, &env)
		f := env.Findings[0]
		if f["state"] != "InProgress" || f["ticket"] != "SEC-42" || f["priority"] != "High" || f["severity"] != "Critical" {
			t.Fatalf("patched %v", f)
		}
		r = e.do(t, leader, "PATCH", "/finding/"+uid0, e.tokA, "", `{"ticket": null}`)
		env = envelope{}
		r.decode(t, &env)
		if f := env.Findings[0]; f["ticket"] != nil || f["state"] != "InProgress" || f["priority"] != "High" {
			t.Fatalf("after clearing the ticket: %v", f)
		}
		if r := e.do(t, leader, "PATCH", "/finding/nope", e.tokA, "", `{"state": "Resolved"}`); r.status != http.StatusNotFound {
			t.Fatalf("patch of a missing finding: %d", r.status)
		}
		for _, tc := range []struct{ body, code, field string }{
			{`{"state": "Done"}`, "INVALID_FIELD", "state"},
			{`{"state": null}`, "INVALID_FIELD", "state"},
			{`{"severity": "Huge"}`, "INVALID_FIELD", "severity"},
			{`{"priority": 3}`, "INVALID_FIELD", "priority"},
			{`{"owner": "x"}`, "UNKNOWN_FIELD", "owner"},
			{`{"state": "Resolved", "ticket": "SEC-1\u202e"}`, "INVALID_FIELD", "ticket"},
			{`{}`, "MISSING_FIELD", "state"},
			{`[1]`, "BAD_REQUEST", ""},
		} {
			r := e.do(t, leader, "PATCH", "/finding/"+uid0, e.tokA, "", tc.body)
			if code, field := r.errCode(t); r.status != http.StatusBadRequest || code != tc.code || field != tc.field {
				t.Errorf("%s: %d %s", tc.body, r.status, r.body)
			}
		}
	})

	t.Run("insert validation", func(t *testing.T) {
		full := map[string]any{"monitored_domain_id": 1, "tool_code": "t", "resource_url": "https://x.example/a",
			"username": "u", "password": "p", "hash": "abc", "hash_algorithm": "SHA-256"}
		with := func(changes map[string]any) string {
			m := map[string]any{}
			for k, v := range full {
				m[k] = v
			}
			for k, v := range changes {
				if v == "<delete>" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			b, _ := json.Marshal(m)
			return string(b)
		}
		cases := []struct {
			name, body, code, field string
		}{
			{"no domain", with(map[string]any{"monitored_domain_id": "<delete>"}), "MISSING_FIELD", "monitored_domain_id"},
			{"string domain", with(map[string]any{"monitored_domain_id": "1"}), "INVALID_FIELD", "monitored_domain_id"},
			{"zero domain", with(map[string]any{"monitored_domain_id": 0}), "INVALID_FIELD", "monitored_domain_id"},
			{"fractional domain", with(map[string]any{"monitored_domain_id": 1.5}), "INVALID_FIELD", "monitored_domain_id"},
			{"no tool", with(map[string]any{"tool_code": "<delete>"}), "MISSING_FIELD", "tool_code"},
			{"empty tool", with(map[string]any{"tool_code": ""}), "INVALID_FIELD", "tool_code"},
			{"no resource", with(map[string]any{"resource_url": "<delete>"}), "MISSING_FIELD", "resource_url"},
			{"relative resource", with(map[string]any{"resource_url": "/login"}), "INVALID_FIELD", "resource_url"},
			{"no username", with(map[string]any{"username": "<delete>"}), "MISSING_FIELD", "username"},
			{"numeric username", with(map[string]any{"username": 5}), "INVALID_FIELD", "username"},
			{"no secret", with(map[string]any{"password": "<delete>", "hash": "<delete>", "hash_algorithm": "<delete>"}), "MISSING_FIELD", "password"},
			{"hash without algorithm", with(map[string]any{"hash_algorithm": "<delete>"}), "MISSING_FIELD", "hash_algorithm"},
			{"algorithm without hash", with(map[string]any{"hash": "<delete>"}), "INVALID_FIELD", "hash_algorithm"},
			{"unknown field", with(map[string]any{"email": "x@y"}), "UNKNOWN_FIELD", "email"},
			// Unicode format characters (category Cf) are refused as
			// control characters are: a right-to-left override makes a
			// row read differently in the console.
			{"bidi override in username", with(map[string]any{"username": "admin\u202egnp.exe"}), "INVALID_FIELD", "username"},
			{"escaped bidi override in resource", strings.Replace(with(nil), `"https://x.example/a"`, `"https://x.example/\u202ea"`, 1), "INVALID_FIELD", "resource_url"},
			{"zero-width space in tool", with(map[string]any{"tool_code": "leak\u200bmon"}), "INVALID_FIELD", "tool_code"},
			{"isolate in password", with(map[string]any{"password": "p\u2066w"}), "INVALID_FIELD", "password"},
			{"not JSON", `{"monitored_domain_id": `, "BAD_REQUEST", ""},
			{"trailing data", with(nil) + ` {}`, "BAD_REQUEST", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, leader, "PUT", "/findings/credentials", e.tokA, "", tc.body)
				if code, field := r.errCode(t); r.status != http.StatusBadRequest || code != tc.code || field != tc.field {
					t.Fatalf("%d %s; want 400 %s %s", r.status, r.body, tc.code, tc.field)
				}
			})
		}
	})

	t.Run("protocol errors", func(t *testing.T) {
		big := `{"monitored_domain_id": 1, "tool_code": "` + strings.Repeat("x", 1<<20) + `"}`
		cases := []struct {
			name                 string
			method, path, token  string
			ct, body             string
			wantStatus           int
			wantCode, wantHeader string
		}{
			{"no token", "GET", "/findings/credential", "", "", "", http.StatusUnauthorized, "UNAUTHORIZED", ""},
			{"bad token", "GET", "/findings/credential", "garbage", "", "", http.StatusUnauthorized, "UNAUTHORIZED", ""},
			{"no tenant", "PUT", "/findings/credentials", e.noTenant, "", credential(1), http.StatusForbidden, "NO_TENANT", ""},
			{"no tenant: get", "GET", "/finding/" + uid0, e.noTenant, "", "", http.StatusForbidden, "NO_TENANT", ""},
			{"no tenant: list", "GET", "/findings/credential", e.noTenant, "", "", http.StatusForbidden, "NO_TENANT", ""},
			{"no tenant: patch", "PATCH", "/finding/" + uid0, e.noTenant, "", `{"state": "Resolved"}`, http.StatusForbidden, "NO_TENANT", ""},
			// Decision 8: reading needs findings_read (or view), inserting
			// and patching findings_write (or edit); a patch answers the
			// finding, so it needs both.
			{"no roles: insert", "PUT", "/findings/credentials", e.noRoles, "", credential(1), http.StatusForbidden, "FORBIDDEN", ""},
			{"no roles: get", "GET", "/finding/" + uid0, e.noRoles, "", "", http.StatusForbidden, "FORBIDDEN", ""},
			{"no roles: list", "GET", "/findings/credential", e.noRoles, "", "", http.StatusForbidden, "FORBIDDEN", ""},
			{"no roles: patch", "PATCH", "/finding/" + uid0, e.noRoles, "", `{"state": "Resolved"}`, http.StatusForbidden, "FORBIDDEN", ""},
			{"view: insert", "PUT", "/findings/credentials", e.viewA, "", credential(1), http.StatusForbidden, "FORBIDDEN", ""},
			{"view: patch", "PATCH", "/finding/" + uid0, e.viewA, "", `{"state": "Resolved"}`, http.StatusForbidden, "FORBIDDEN", ""},
			{"findings_write: get", "GET", "/finding/" + uid0, e.writerA, "", "", http.StatusForbidden, "FORBIDDEN", ""},
			{"findings_write: patch", "PATCH", "/finding/" + uid0, e.writerA, "", `{"state": "Resolved"}`, http.StatusForbidden, "FORBIDDEN", ""},
			{"view on another tenant's node", "GET", "/finding/" + uid0, e.viewB, "", "", http.StatusForbidden, "FORBIDDEN", ""},
			{"bad token: patch", "PATCH", "/finding/" + uid0, "garbage", "", `{"state": "Resolved"}`, http.StatusUnauthorized, "UNAUTHORIZED", ""},
			{"get of a missing finding", "GET", "/finding/0192d0b4-7cde-7000-8000-000000000000", e.tokA, "", "", http.StatusNotFound, "FINDING_NOT_FOUND", ""},
			{"patch of a missing finding", "PATCH", "/finding/0192d0b4-7cde-7000-8000-000000000000", e.tokA, "", `{"state": "Resolved"}`, http.StatusNotFound, "FINDING_NOT_FOUND", ""},
			{"patch with a wrong content type", "PATCH", "/finding/" + uid0, e.tokA, "text/plain", `{"state": "Resolved"}`, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", ""},
			{"wrong method on a finding", "DELETE", "/finding/" + uid0, e.tokA, "", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Allow"},
			{"wrong content type", "PUT", "/findings/credentials", e.tokA, "text/plain", credential(1), http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", ""},
			{"too large", "PUT", "/findings/credentials", e.tokA, "", big, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", ""},
			{"unknown path", "GET", "/findings/other", e.tokA, "", "", http.StatusNotFound, "NOT_FOUND", ""},
			{"wrong method", "POST", "/findings/credentials", e.tokA, "", credential(1), http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Allow"},
			{"list on the insert's path", "GET", "/findings/credentials", e.tokA, "", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Allow"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, node := range []int{leader, follower} {
					r := e.do(t, node, tc.method, tc.path, tc.token, tc.ct, tc.body)
					if code, _ := r.errCode(t); r.status != tc.wantStatus || code != tc.wantCode {
						t.Fatalf("node %d: %d %s", node, r.status, r.body)
					}
					if tc.wantHeader != "" && r.header.Get(tc.wantHeader) == "" {
						t.Fatalf("no %s header", tc.wantHeader)
					}
				}
			})
		}
	})

	// GET on the insert's (plural) path names the list's (singular).
	t.Run("list path named", func(t *testing.T) {
		r := e.do(t, follower, "GET", "/findings/credentials", e.tokA, "", "")
		var body struct {
			Params  map[string]string
			Message string
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusMethodNotAllowed ||
			body.Params["LIST_PATH"] != "/intel/api/sdk/v0/findings/credential" ||
			!strings.Contains(body.Message, "listed with GET /intel/api/sdk/v0/findings/credential") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("list query errors", func(t *testing.T) {
		for _, q := range []struct{ query, field string }{
			{"limit=1001", "limit"}, {"limit=0", "limit"}, {"page=0", "page"}, {"page=x", "page"},
			{"state=Open", "state"}, {"from=-1", "from"}, {"monitored_domain=a", "monitored_domain"},
			{"sort=uid", "sort"}, {"page=1&page=2", "page"}, {"tool=", "tool"},
		} {
			r := e.do(t, follower, "GET", "/findings/credential?"+q.query, e.tokA, "", "")
			if code, field := r.errCode(t); r.status != http.StatusBadRequest || field != q.field || code == "" {
				t.Errorf("%s: %d %s", q.query, r.status, r.body)
			}
		}
	})
}

// TestAPI_Paging walks every page of a tenant's findings while inserts go
// on: with to pinned before the new inserts, no finding is skipped or
// repeated.
func TestAPI_Paging(t *testing.T) {
	e := newEnv(t)
	leader := e.c.Leader()
	follower := e.c.Followers()[0]
	const n = 230
	want := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		if i%23 == 0 {
			// 10 distinct discovery seconds: many ties, broken by uid.
			wg.Wait()
			e.clock.Add(1)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := e.send(t, []int{leader, follower}[i%2], "PUT", "/findings/credentials", e.tokA, "", credential(i))
			var u struct{ UID string }
			if err == nil {
				err = json.Unmarshal(r.body, &u)
			}
			if err != nil || r.status != http.StatusCreated {
				t.Errorf("insert %d: %v %d %s", i, err, r.status, r.body)
				return
			}
			mu.Lock()
			want[u.UID] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	last := e.clock.Load()

	// New findings keep arriving during the walk (a few before each
	// page), one second later.
	e.clock.Add(1)
	next := n
	seen := map[string]bool{}
	var prev struct {
		date int64
		uid  string
	}
	for page := 1; ; page++ {
		for range 3 {
			e.insert(t, []int{leader, follower}[next%2], e.tokA, next, http.StatusCreated)
			next++
		}
		r := e.do(t, []int{leader, follower}[page%2], "GET", fmt.Sprintf("/findings/credential?limit=17&page=%d&to=%d", page, last+1), e.tokA, "", "")
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", page, r.status, r.body)
		}
		var env envelope
		r.decode(t, &env)
		if env.Total != n || env.Page != page || env.Limit != 17 {
			t.Fatalf("page %d: total %d page %d limit %d", page, env.Total, env.Page, env.Limit)
		}
		for _, f := range env.Findings {
			uid, date := f["uid"].(string), int64(f["discovery_date"].(float64))
			if seen[uid] {
				t.Fatalf("page %d repeats %s", page, uid)
			}
			seen[uid] = true
			// Newest first, ties by uid.
			if prev.uid != "" && (date > prev.date || date == prev.date && uid < prev.uid) {
				t.Fatalf("page %d: %s (%d) after %s (%d)", page, uid, date, prev.uid, prev.date)
			}
			prev.date, prev.uid = date, uid
		}
		if len(env.Findings) < 17 {
			break
		}
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("walked %d findings, want the %d inserted", len(seen), len(want))
	}

	// Filters.
	check := func(query string, wantTotal int) {
		t.Helper()
		var env envelope
		r := e.do(t, follower, "GET", "/findings/credential?"+query, e.tokA, "", "")
		r.decode(t, &env)
		if r.status != http.StatusOK || env.Total != wantTotal {
			t.Fatalf("%s: %d total %d, want %d", query, r.status, env.Total, wantTotal)
		}
	}
	first := last - 9
	check(fmt.Sprintf("tool=scanner&to=%d", last+1), n/2)
	check(fmt.Sprintf("monitored_domain=1&to=%d", last+1), (n+2)/3)
	check("username=user7@example.com", 1)
	check(fmt.Sprintf("from=%d&to=%d", first, first+1), 23)
	check(fmt.Sprintf("state=Unassigned&to=%d", last+1), n)
	check("state=Resolved", 0)
	var env envelope
	e.do(t, leader, "GET", "/findings/credential?"+url.Values{"to": {fmt.Sprint(last + 1)}}.Encode(), e.tokA, "", "").decode(t, &env)
	if env.Limit != findings.DefaultLimit || len(env.Findings) != findings.DefaultLimit || env.Page != 1 {
		t.Fatalf("default paging: page %d limit %d, %d findings", env.Page, env.Limit, len(env.Findings))
	}
}

// ackLog records the acknowledged inserts of concurrent writers.
type ackLog struct {
	mu    sync.Mutex
	acked map[string]int // uid -> credential number
	acks  chan struct{}  // a token per acknowledgement, while it has room
}

func newAckLog() *ackLog {
	return &ackLog{acked: map[string]int{}, acks: make(chan struct{}, 1000)}
}

// record notes the acknowledged insert of credential n from its answer's
// body; false (after reporting the error) when the body names no uid.
func (l *ackLog) record(t *testing.T, n int, body []byte) bool {
	var u struct{ UID string }
	if err := json.Unmarshal(body, &u); err != nil || u.UID == "" {
		t.Errorf("insert %d: %v %s", n, err, body)
		return false
	}
	l.mu.Lock()
	l.acked[u.UID] = n
	l.mu.Unlock()
	select {
	case l.acks <- struct{}{}:
	default:
	}
	return true
}

// TestAPI_LeaderKill kills the leader while inserts go on through the
// followers: every acknowledged insert is readable from the new leader.
func TestAPI_LeaderKill(t *testing.T) {
	e := newEnv(t)
	leader := e.c.Leader()
	followers := e.c.Followers()
	log := newAckLog()
	var wg sync.WaitGroup
	const writers, perWriter = 8, 50
	for w := range writers {
		wg.Go(func() {
			for k := range perWriter {
				n := w*perWriter + k
				// Retry until acknowledged, as a client would: an insert
				// that failed may or may not be stored, and retrying it is
				// safe.
				var r reply
				var err error
				for try := 0; ; try++ {
					r, err = e.send(t, followers[(n+try)%2], "PUT", "/findings/credentials", e.tokA, "", credential(n))
					if err == nil && r.status == http.StatusCreated {
						break
					}
					if try == 500 {
						t.Errorf("insert %d never acknowledged: %v %d %s", n, err, r.status, r.body)
						return
					}
					select {
					case <-time.After(20 * time.Millisecond): // client backoff
					case <-t.Context().Done():
						return
					}
				}
				if !log.record(t, n, r.body) {
					return
				}
			}
		})
	}
	for range 60 {
		<-log.acks
	}
	e.c.Kill(leader)
	wg.Wait()
	newLeader := e.c.Leader()
	if newLeader == leader {
		t.Fatal("the killed node still leads")
	}
	if len(log.acked) != writers*perWriter {
		t.Fatalf("%d inserts acknowledged, want %d", len(log.acked), writers*perWriter)
	}
	for uid, n := range log.acked {
		r := e.do(t, followers[0], "GET", "/finding/"+uid, e.tokA, "", "")
		if r.status != http.StatusOK {
			t.Fatalf("acknowledged insert %d (%s) lost: %d %s", n, uid, r.status, r.body)
		}
	}
	// The killed node comes back with every acknowledged finding in its
	// own state.
	e.c.Restart(leader)
	e.c.WaitConverged()
	back := e.c.Server(leader).Store()
	for uid, n := range log.acked {
		if _, err := back.Finding("a", uid); err != nil {
			t.Fatalf("restarted node: acknowledged insert %d (%s): %v", n, uid, err)
		}
	}
	// Retrying everything is safe: the acknowledged ones keep their uids.
	// (The restarted node may still cause an election: a 503 is retried,
	// as clients do, a bounded number of times.)
	for uid, n := range log.acked {
		r := e.do(t, followers[1], "PUT", "/findings/credentials", e.tokA, "", credential(n))
		for try := 0; r.status == http.StatusServiceUnavailable && try < 20; try++ {
			t.Logf("retry of %d answered 503 (%s): again", n, r.body)
			r = e.do(t, followers[1], "PUT", "/findings/credentials", e.tokA, "", credential(n))
		}
		var u struct{ UID string }
		r.decode(t, &u)
		if r.status != http.StatusCreated || u.UID != uid || r.header.Get(findings.HeaderDuplicate) != "true" {
			t.Fatalf("retry of %d: %d %s, want 201 %s, a duplicate", n, r.status, r.body, uid)
		}
	}
}

// TestAPI_PartitionedLeader cuts the leader off from the other nodes
// while inserts go on through it. The API is mounted OnLeaderWrite, so
// inserts and patches reach the handler on a node that only believes it
// leads, without a quorum check first: the cut-off leader must still
// answer them 503 (it cannot commit) and never acknowledge a write the
// majority does not hold. Reads through it keep the consistent read and
// are refused too, not served stale.
func TestAPI_PartitionedLeader(t *testing.T) {
	e := newEnv(t, mastertest.WithConfig(func(_ int, cfg *master.Config) {
		cfg.LeaderWait = time.Second
	}))
	old := e.c.Leader()
	uid0 := e.insert(t, old, e.tokA, 0, http.StatusCreated)
	var majority []int
	for _, i := range e.c.Running() {
		if i != old {
			majority = append(majority, i)
		}
	}

	// Writers insert through the leader; each stops at its first refusal.
	log := newAckLog()
	var refused atomic.Int64
	var wg sync.WaitGroup
	const writers, perWriter = 4, 100
	for w := range writers {
		wg.Go(func() {
			for k := range perWriter {
				n := 1 + w*perWriter + k
				r, err := e.send(t, old, "PUT", "/findings/credentials", e.tokA, "", credential(n))
				if err != nil {
					t.Errorf("insert %d: %v", n, err)
					return
				}
				switch r.status {
				case http.StatusCreated:
				case http.StatusServiceUnavailable:
					// May or may not be stored: the client retries.
					refused.Add(1)
					return
				default:
					t.Errorf("insert %d: %d %s", n, r.status, r.body)
					return
				}
				if !log.record(t, n, r.body) {
					return
				}
			}
		})
	}
	for range 20 {
		<-log.acks
	}
	e.c.Partition(old)

	// Sent after the cut: nothing of these can reach the majority.
	const lost = 9999
	r := e.do(t, old, "PUT", "/findings/credentials", e.tokA, "", credential(lost))
	// NO_LEADER when the node knew it no longer led before proposing,
	// LEADER_LOST when it lost the leadership with the command proposed.
	if code, _ := r.errCode(t); r.status != http.StatusServiceUnavailable || (code != "NO_LEADER" && code != "LEADER_LOST") || r.header.Get("Retry-After") == "" {
		t.Fatalf("insert on the cut-off leader: %d %s", r.status, r.body)
	}
	r = e.do(t, old, "PATCH", "/finding/"+uid0, e.tokA, "", `{"state": "Resolved"}`)
	if code, _ := r.errCode(t); r.status != http.StatusServiceUnavailable || (code != "NO_LEADER" && code != "LEADER_LOST") {
		t.Fatalf("patch on the cut-off leader: %d %s", r.status, r.body)
	}
	r = e.do(t, old, "GET", "/finding/"+uid0, e.tokA, "", "")
	if code, _ := r.errCode(t); r.status != http.StatusServiceUnavailable || code != "NO_LEADER" {
		t.Fatalf("get on the cut-off leader: %d %s", r.status, r.body)
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Fatal("no insert through the cut-off leader was refused")
	}
	t.Logf("%d inserts acknowledged, %d refused", len(log.acked), refused.Load())

	// The majority holds every acknowledged insert, and neither the
	// refused insert nor the refused patch.
	check := func(t *testing.T, st *store.Store) {
		t.Helper()
		for uid, n := range log.acked {
			if _, err := st.Finding("a", uid); err != nil {
				t.Fatalf("node %s: acknowledged insert %d (%s): %v", st.ID(), n, uid, err)
			}
		}
		p, err := st.Findings("a", store.FindingQuery{Username: fmt.Sprintf("user%d@example.com", lost), Limit: 10})
		if err != nil || p.Total != 0 {
			t.Fatalf("node %s: the refused insert: %d found, %v", st.ID(), p.Total, err)
		}
		f, err := st.Finding("a", uid0)
		if err != nil || f.State != findings.StateUnassigned {
			t.Fatalf("node %s: finding %s after the refused patch: %q, %v", st.ID(), uid0, f.State, err)
		}
	}
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		r, err := e.send(t, majority[0], "GET", "/finding/"+uid0, e.tokA, "", "")
		return err == nil && r.status == http.StatusOK
	}, "the majority to serve a consistent read")
	newLeader := e.c.Leader()
	if newLeader == old {
		t.Fatal("the cut-off node leads")
	}
	check(t, e.c.Server(newLeader).Store())

	// Healed, the old leader drops what it could not commit.
	e.c.Heal(old)
	e.c.WaitConverged()
	for _, i := range e.c.Running() {
		check(t, e.c.Server(i).Store())
	}
}
