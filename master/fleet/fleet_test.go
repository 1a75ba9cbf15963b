package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master/auth"
)

func masters(context.Context) ([]Master, error) {
	// No HTTP addresses: these masters are not asked anything (a real
	// cluster's are, in TestFleet_Masters).
	return []Master{{ID: "m2", RaftAddr: "127.0.0.1:7002", Voter: true}, {ID: "m1", RaftAddr: "127.0.0.1:7001", Voter: true, Leader: true}}, nil
}

func token(roles ...string) string {
	return auth.EncodeUnsigned(auth.Claims{User: "u", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: roles}}})
}

func newTestFleet(t *testing.T, cfg Config) (*Fleet, *httptest.Server) {
	t.Helper()
	f := New(cfg, &auth.Verifier{AllowUnsigned: true}, masters, nil)
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	return f, srv
}

func call(t *testing.T, method, url, tok, ctype, body string) (int, string) {
	t.Helper()
	code, b, _ := callAllow(t, method, url, tok, ctype, body)
	return code, b
}

// callAllow is call that also returns the answer's Allow header.
func callAllow(t *testing.T, method, url, tok, ctype, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, b := calltest.Do(t, calltest.Client().Do, req)
	return resp.StatusCode, string(b), resp.Header.Get("Allow")
}

// TestFleet_Handler: heartbeats with a fleet_report token on the root are
// listed after the masters; bad ones are refused with a JSON error and
// change nothing.
func TestFleet_Handler(t *testing.T) {
	t.Parallel()
	_, srv := newTestFleet(t, Default())
	view := token("view")
	reporter := token("fleet_report")
	good := `{"id": "e1", "role": "engine", "site": "par", "version": "v1", "ready": false, "reasons": ["no tree yet"], "warnings": ["tree 7 refused"], "consumer_lag": 12}`
	if code, body := call(t, "PUT", srv.URL+Pattern+"/engine/e1", reporter, "application/json", good); code != 200 || strings.TrimSpace(body) != "null" {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	if code, body := call(t, "PUT", srv.URL+Pattern+"/satellite/s1", token("admin"), "application/json; charset=utf-8", `{"ready": true, "spool_depth": 0, "webhooks_loaded": 3}`); code != 200 {
		t.Fatalf("heartbeat with role and id from the path: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, method, path, tok, ctype, body string
		status                               int
		code                                 string
	}{
		{"no token", "PUT", "/engine/e9", "", "application/json", good, 401, "UNAUTHORIZED"},
		{"view only", "PUT", "/engine/e9", view, "application/json", good, 403, "MISSING_REQUIRED_PERMISSIONS"},
		{"fleet_report below the root", "PUT", "/engine/e9", auth.EncodeUnsigned(auth.Claims{User: "u", Auths: map[string]auth.Authorization{"a": {Path: []string{"root", "acme"}, Roles: []string{"fleet_report"}}}}), "application/json", good, 403, "MISSING_REQUIRED_PERMISSIONS"},
		{"content type", "PUT", "/engine/e9", reporter, "text/plain", good, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"unknown field", "PUT", "/engine/e9", reporter, "application/json", `{"cpu": 1}`, 400, "BAD_REQUEST"},
		{"two objects", "PUT", "/engine/e9", reporter, "application/json", `{} {}`, 400, "BAD_REQUEST"},
		{"path and body differ", "PUT", "/engine/e9", reporter, "application/json", good, 400, "INVALID_FIELD"},
		{"master role", "PUT", "/master/e9", reporter, "application/json", `{}`, 400, "INVALID_FIELD"},
		{"unknown role", "PUT", "/gateway/g1", reporter, "application/json", `{}`, 400, "INVALID_FIELD"},
		{"bad id", "PUT", "/engine/-x", reporter, "application/json", `{}`, 400, "INVALID_FIELD"},
		{"negative lag", "PUT", "/engine/e9", reporter, "application/json", `{"consumer_lag": -1}`, 400, "INVALID_FIELD"},
		{"too many warnings", "PUT", "/engine/e9", reporter, "application/json", `{"warnings": [` + strings.TrimSuffix(strings.Repeat(`"w",`, maxReasons+1), ",") + `]}`, 400, "INVALID_FIELD"},
		{"a long warning", "PUT", "/engine/e9", reporter, "application/json", `{"warnings": ["` + strings.Repeat("w", maxText+1) + `"]}`, 400, "INVALID_FIELD"},
		{"too large", "PUT", "/engine/e9", reporter, "application/json", `{"site": "` + strings.Repeat("x", maxBody) + `"}`, 413, "PAYLOAD_TOO_LARGE"},
		{"POST a heartbeat", "POST", "/engine/e9", reporter, "application/json", good, 405, "METHOD_NOT_ALLOWED"},
		{"GET a heartbeat", "GET", "/engine/e1", view, "", "", 405, "METHOD_NOT_ALLOWED"},
		{"PATCH a member", "PATCH", "/engine/e1", token("admin"), "", "", 405, "METHOD_NOT_ALLOWED"},
		{"POST the list", "POST", "", view, "application/json", `{}`, 405, "METHOD_NOT_ALLOWED"},
		{"below a member", "PUT", "/engine/e1/x", reporter, "application/json", good, 404, "NOT_FOUND"},
		{"role only", "GET", "/engine", view, "", "", 404, "NOT_FOUND"},
		{"trailing slash", "GET", "/", view, "", "", 404, "NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, allow := callAllow(t, tc.method, srv.URL+Pattern+tc.path, tc.tok, tc.ctype, tc.body)
			if want := map[string]string{"": "GET, HEAD", "/engine/e9": "PUT, DELETE", "/engine/e1": "PUT, DELETE"}[tc.path]; tc.status == 405 && allow != want {
				t.Errorf("Allow %q, want %q", allow, want)
			}
			var e struct {
				Code    string            `json:"code"`
				Params  map[string]string `json:"params"`
				Message string            `json:"message"`
			}
			if code != tc.status || json.Unmarshal([]byte(body), &e) != nil || e.Code != tc.code || e.Params == nil || e.Message == "" {
				t.Errorf("%d %s, want %d %s", code, body, tc.status, tc.code)
			}
		})
	}
	if code, body := call(t, "GET", srv.URL+Pattern, "", "", ""); code != 401 {
		t.Errorf("list without a token: %d %s", code, body)
	}
	code, body := call(t, "GET", srv.URL+Pattern, view, "", "")
	var list struct {
		Members []Member `json:"members"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	var got []string
	for _, m := range list.Members {
		got = append(got, m.Role+"/"+m.ID)
	}
	if strings.Join(got, " ") != "master/m1 master/m2 engine/e1 satellite/s1" {
		t.Fatalf("members %v (refused heartbeats must add nothing)", got)
	}
	e1 := list.Members[2]
	if e1.Site != "par" || e1.Ready || len(e1.Reasons) != 1 || len(e1.Warnings) != 1 || e1.ConsumerLag == nil || *e1.ConsumerLag != 12 || e1.Stale {
		t.Errorf("engine e1: %+v", e1)
	}
	if m1 := list.Members[0]; !m1.Leader || m1.Suffrage != "voter" || m1.Health != HealthUnreachable || m1.Ready || len(m1.Reasons) != 1 {
		t.Errorf("master m1 (no HTTP address): %+v", m1)
	}
	if code, _, _ := callAllow(t, "HEAD", srv.URL+Pattern, view, "", ""); code != 200 {
		t.Errorf("HEAD of the list: %d", code)
	}
}

// TestFleet_Stale: a member that stops reporting is stale after
// StaleAfter and gone after DropAfter; a new report makes it fresh.
func TestFleet_Stale(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{StaleAfter: 30 * time.Second, DropAfter: time.Minute, MaxMembers: 2}, &auth.Verifier{}, masters, nil)
		state := func() string {
			ms, err := f.List(t.Context(), time.Now(), "")
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, m := range ms[2:] {
				s = append(s, m.ID+map[bool]string{true: ":stale", false: ""}[m.Stale])
			}
			return strings.Join(s, " ")
		}
		for _, id := range []string{"a", "b"} {
			if err := f.Report(Report{ID: id, Role: RoleEngine}, "u", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Report(Report{ID: "c", Role: RoleEngine}, "u", time.Now()); !errors.Is(err, ErrFull) {
			t.Fatalf("a third member of two: %v, want ErrFull", err)
		}
		time.Sleep(30 * time.Second)
		if err := f.Report(Report{ID: "b", Role: RoleEngine}, "u", time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := state(); got != "a:stale b" {
			t.Errorf("after 30s: %q", got)
		}
		time.Sleep(30 * time.Second)
		if got := state(); got != "b:stale" {
			t.Errorf("after 60s: %q", got)
		}
		if err := f.Report(Report{ID: "c", Role: RoleEngine}, "u", time.Now()); err != nil {
			t.Errorf("a new member once one was dropped: %v", err)
		}
	})
}
