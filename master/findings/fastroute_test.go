package findings

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

// TestFastRoute: the insert's fixed route and the mux give the same
// answer (status, headers, body) and the same r.Pattern to every request,
// the inserts they serve and refuse alike, and the requests that are not
// exactly the insert's go to the mux.
func TestFastRoute(t *testing.T) {
	if !strings.HasPrefix(insertPath, Prefix) {
		t.Fatalf("insertPath %s is not below Prefix %s", insertPath, Prefix)
	}
	var h http.Handler
	c := mastertest.TestCluster(t, 1, mastertest.WithSetup(func(_ int, s *master.Server) {
		cfg := Default()
		cfg.MaxBody = 1024
		h = New(cfg, s.Store(), s.Verifier(), nil).Handler()
	}))
	fast, ok := h.(*fastRoutes)
	if !ok {
		t.Fatalf("Handler returned %T, want *fastRoutes", h)
	}
	tok := "Bearer " + c.Token(auth.FindingsClaims("ingest", "a", auth.FindingsRead, auth.FindingsWrite))
	noTenant := "Bearer " + c.Token(auth.Claims{User: "ingest", Auths: map[string]auth.Authorization{
		"a": {Path: []string{"root", "a"}, Roles: []string{"view"}}, "b": {Path: []string{"root", "b"}, Roles: []string{"view"}},
	}})
	const body = `{"monitored_domain_id": 1, "tool_code": "t", "resource_url": "https://example.com/login", "username": "u@example.com", "hash": "ab", "hash_algorithm": "SHA-256"}`
	serve := func(h http.Handler, method, target, auth, ctype, body string) (*httptest.ResponseRecorder, string) {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w, r.Pattern
	}
	// The insert is in the state before the comparisons: both routes then
	// answer 200 with its uid.
	if w, _ := serve(fast.mux, http.MethodPut, insertPath, tok, "application/json", body); w.Code != http.StatusCreated {
		t.Fatalf("first insert: %d %s", w.Code, w.Body)
	}
	const ct = "application/json"
	// Counts the requests the fixed route serves (the mux holds the
	// insert's handler itself).
	var fixed int
	insert := fast.insert
	fast.insert = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fixed++
		insert.ServeHTTP(w, r)
	})
	for _, tc := range []struct {
		name, method, target, auth, ctype, body string
		status                                  int
		fast                                    bool // served by the fixed route
	}{
		{"duplicate", http.MethodPut, insertPath, tok, ct, body, http.StatusCreated, true},
		{"json suffix", http.MethodPut, insertPath, tok, "application/vnd.x+json; charset=utf-8", body, http.StatusCreated, true},
		{"no token", http.MethodPut, insertPath, "", ct, body, http.StatusUnauthorized, true},
		{"bad token", http.MethodPut, insertPath, "Bearer x.y.z", ct, body, http.StatusUnauthorized, true},
		{"no tenant", http.MethodPut, insertPath, noTenant, ct, body, http.StatusForbidden, true},
		{"media type", http.MethodPut, insertPath, tok, "text/plain", body, http.StatusUnsupportedMediaType, true},
		{"syntax", http.MethodPut, insertPath, tok, ct, `{"tool_code": `, http.StatusBadRequest, true},
		{"unknown field", http.MethodPut, insertPath, tok, ct, `{"tool": "t"}`, http.StatusBadRequest, true},
		{"missing field", http.MethodPut, insertPath, tok, ct, `{"tool_code": "t"}`, http.StatusBadRequest, true},
		{"too large", http.MethodPut, insertPath, tok, ct, `{"tool_code": "` + strings.Repeat("x", 2000) + `"}`, http.StatusRequestEntityTooLarge, true},
		{"query", http.MethodPut, insertPath + "?x=1", tok, ct, body, http.StatusCreated, true},
		{"absolute target", http.MethodPut, "http://example.com" + insertPath, tok, ct, body, http.StatusCreated, true},
		{"method", http.MethodPost, insertPath, tok, ct, body, http.StatusMethodNotAllowed, false},
		{"get", http.MethodGet, insertPath, tok, "", "", http.StatusMethodNotAllowed, false},
		{"escaped slash", http.MethodPut, strings.Replace(insertPath, "/credentials", "%2Fcredentials", 1), tok, ct, body, http.StatusNotFound, false},
		{"escaped letter", http.MethodPut, strings.Replace(insertPath, "credentials", "cred%65ntials", 1), tok, ct, body, http.StatusCreated, false},
		{"trailing slash", http.MethodPut, insertPath + "/", tok, ct, body, http.StatusNotFound, false},
		{"unclean", http.MethodPut, strings.Replace(insertPath, "/findings/", "/x/../findings/", 1), tok, ct, body, http.StatusTemporaryRedirect, false},
		{"double slash", http.MethodPut, strings.Replace(insertPath, "/findings/", "//findings/", 1), tok, ct, body, http.StatusTemporaryRedirect, false},
		{"other route", http.MethodGet, Prefix + "findings/credential", tok, "", "", http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fixed
			wf, pf := serve(fast, tc.method, tc.target, tc.auth, tc.ctype, tc.body)
			if served := fixed > before; served != tc.fast {
				t.Errorf("served by the fixed route: %v, want %v", served, tc.fast)
			}
			wm, pm := serve(fast.mux, tc.method, tc.target, tc.auth, tc.ctype, tc.body)
			if wf.Code != tc.status {
				t.Errorf("status %d, want %d: %s", wf.Code, tc.status, wf.Body)
			}
			if wf.Code != wm.Code || !reflect.DeepEqual(wf.Header(), wm.Header()) || wf.Body.String() != wm.Body.String() || pf != pm {
				t.Errorf("fixed route and mux differ:\n%d %v %q pattern %q\n%d %v %q pattern %q",
					wf.Code, wf.Header(), wf.Body, pf, wm.Code, wm.Header(), wm.Body, pm)
			}
		})
	}
	// A new finding: 201 and a uid from both (not the same uid).
	for _, h := range []http.Handler{fast, fast.mux} {
		w, _ := serve(h, http.MethodPut, insertPath, tok, "application/json", strings.Replace(body, "u@", reflect.TypeOf(h).String()+"@", 1))
		var got struct{ UID string }
		if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusCreated || err != nil || got.UID == "" {
			t.Errorf("%T: new finding: %d %s", h, w.Code, w.Body)
		}
	}
}
