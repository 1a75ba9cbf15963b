package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
)

// TestMaster_HostileRequests runs the attacks against the real
// binary: bad JSON without a token is a 401 (it was a 400), a body that
// never ends without a token is answered at once, and 1 MiB of '[' with a
// valid token is a 400 while the master keeps serving.
func TestMaster_HostileRequests(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	token := unsignedToken(t, "scanner", "findings=root,acme:findings_read,findings_write")
	send := func(method, path, tok string, body io.Reader) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := calltest.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	if r, b := send("POST", "/api/v2_beta/event/active/all", "", strings.NewReader("{bad json")); r.StatusCode != http.StatusUnauthorized || !strings.Contains(b, `"code":"UNAUTHORIZED"`) {
		t.Fatalf("bad JSON without a token: %d %s", r.StatusCode, b)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	r, b := send("PUT", "/intel/api/sdk/v0/findings/credentials", "", pr)
	if r.StatusCode != http.StatusUnauthorized || !r.Close {
		t.Fatalf("endless body without a token: %d (close %v) %s", r.StatusCode, r.Close, b)
	}

	for range 4 {
		r, b = send("PUT", "/intel/api/sdk/v0/findings/credentials", token, bytes.NewReader(bytes.Repeat([]byte("["), 1<<20)))
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(b, "nests deeper than 128") {
			t.Fatalf("1 MiB of '[': %d %.300s", r.StatusCode, b)
		}
	}
	if r, b := send("GET", "/healthz", "", nil); r.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d %s", r.StatusCode, b)
	}
}

// TestMaster_AuthenticatedAnswersNotCached: every answer to a request that
// carries a token, of every role and every API (configuration, test
// events, findings, fleet, the master's own endpoints), successful or
// refused, is Cache-Control: no-store and X-Content-Type-Options: nosniff,
// each exactly once.
func TestMaster_AuthenticatedAnswersNotCached(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	mint := func(args ...string) string {
		return strings.TrimSpace(mustRun(t, append([]string{"token", "--unsigned"}, args...)...))
	}
	admin := mint("--user", "ops", "--auth", "all=root:admin")
	viewer := mint("--user", "viewer", "--auth", "all=root:view")
	editor := mint("--user", "ed", "--auth", "acme=root,acme:view,edit,test_event_execute_actions")
	reporter := mint("--user", "engine", "--auth", "fleet=root:fleet_report")
	tenant := mint("--user", "scanner", "--auth", "findings=root,acme:findings_read,findings_write")
	for _, tc := range []struct{ name, method, path, token, body string }{
		{"admin backup", "GET", "/squall/v1/backup", admin, ""},
		{"admin cluster", "GET", "/squall/v1/cluster", admin, ""},
		{"admin tree", "GET", "/api/v2_beta/config/active/tree/info/all", admin, ""},
		{"viewer tree", "GET", "/api/v2_beta/config/active/tree/children/all", viewer, ""},
		{"viewer draft", "GET", "/squall/v1/draft", viewer, ""},
		{"viewer fleet", "GET", "/squall/v1/fleet", viewer, ""},
		{"viewer refused a backup", "GET", "/squall/v1/backup", viewer, ""},
		{"editor test event", "POST", "/api/v2_beta/event/active/acme", editor,
			`{"process_type": "SkipActions", "event": {"type": "t", "created_ms": 1, "payload": {}}}`},
		{"editor refused", "GET", "/api/v2_beta/config/active/tree/info/all", editor, ""},
		{"reporter refused the fleet list", "GET", "/squall/v1/fleet", reporter, ""},
		{"findings list", "GET", "/intel/api/sdk/v0/findings/credential", tenant, ""},
		{"findings missing", "GET", "/intel/api/sdk/v0/finding/nope", tenant, ""},
		{"a wrong token", "GET", "/api/v2_beta/config/active/tree/info/all", "not-a-token", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tc.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := calltest.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
				t.Errorf("%d: Cache-Control %q, want no-store", resp.StatusCode, got)
			}
			if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
				t.Errorf("%d: X-Content-Type-Options %q, want nosniff", resp.StatusCode, got)
			}
		})
	}
}

// TestRefusedOutsideAuth_AnswerAtOnce: the refusals no route wrapper
// authenticates — an unknown path (404), a wrong method (405), a fleet
// route without a valid token, a call to an unknown webhook id — are
// answered while the caller is still sending an endless body, and the
// connection closes, on a master and in squall dev: none waits for the
// body deadline.
func TestRefusedOutsideAuth_AnswerAtOnce(t *testing.T) {
	t.Parallel()
	dev := startDev(t, t.TempDir())
	for _, tc := range []struct {
		name, method, base, path string
		status                   int
	}{
		{"master 404", "POST", startMaster(t, "--allow-unsigned-tokens"), "/nope", http.StatusNotFound},
		{"master 405", "DELETE", startMaster(t, "--allow-unsigned-tokens"), "/squall/v1/cluster", http.StatusMethodNotAllowed},
		{"dev 404", "POST", "http://" + dev.addr, "/nope", http.StatusNotFound},
		{"dev 405", "PUT", "http://" + dev.addr, "/squall/v1/cluster", http.StatusMethodNotAllowed},
		{"dev fleet heartbeat without a token", "PUT", "http://" + dev.addr, "/squall/v1/fleet/engine/e1", http.StatusUnauthorized},
		{"dev fleet list, wrong method", "POST", "http://" + dev.addr, "/squall/v1/fleet", http.StatusMethodNotAllowed},
		{"dev fleet, unknown path", "PUT", "http://" + dev.addr, "/squall/v1/fleet/x", http.StatusNotFound},
		{"dev unknown webhook", "POST", "http://" + dev.addr, "/engine/webhook/event/ghost?token=x", http.StatusNotFound},
		{"dev webhook, wrong token", "POST", "http://" + dev.addr, "/engine/webhook/event/disk_alerts?token=x", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Well under the 30 s body deadline.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { // a body that starts, then stalls until the test ends
				if _, err := pw.Write(bytes.Repeat([]byte("x"), 1<<10)); err != nil {
					return
				}
				<-ctx.Done()
				pw.CloseWithError(ctx.Err())
			}()
			req, err := http.NewRequestWithContext(ctx, tc.method, tc.base+tc.path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := calltest.Client().Do(req)
			if err != nil {
				t.Fatalf("no answer while the body is being sent: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("%d (close %v) %.200s, want %d and the connection closed", resp.StatusCode, resp.Close, b, tc.status)
			}
		})
	}
}
