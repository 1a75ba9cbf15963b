package dev

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/auth"
)

// TestPrepareDir: the first start creates the key, the join secret, the
// example webhook and the executor settings, private to the user; a later
// start keeps them (edits included) and mints tokens the key verifies.
func TestPrepareDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	d, err := prepareDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !d.firstStart || d.adminToken == "" || d.engineToken == "" {
		t.Fatalf("first start %+v", d)
	}
	hookRel := filepath.Join(webhooksDir, WebhookID+".json")
	files := []string{keyFile, joinTokenFile, actionsFile, hookRel, WebhookTokenFile}
	before := map[string]string{}
	for _, f := range files {
		p := filepath.Join(dir, f)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		before[f] = string(b)
	}
	var actions struct {
		Archive struct {
			BasePath string            `json:"base_path"`
			Paths    map[string]string `json:"paths"`
		} `json:"archive"`
	}
	if err := json.Unmarshal([]byte(before[actionsFile]), &actions); err != nil || !filepath.IsAbs(actions.Archive.BasePath) ||
		actions.Archive.BasePath != mustAbs(t, filepath.Join(dir, ArchiveDir)) || actions.Archive.Paths["disk_alerts"] != ArchiveFile {
		t.Errorf("actions.json %s (%v)", before[actionsFile], err)
	}
	if _, err := exampleNode(); err != nil {
		t.Errorf("the example tree: %v", err)
	}

	// The user edits the webhook and the master has state: a restart.
	hookToken := strings.TrimSpace(before[WebhookTokenFile])
	// The webhook token is random: not the fixed token of older versions,
	// and not the same in another data dir.
	if len(hookToken) != 32 || hookToken == legacyWebhookToken {
		t.Errorf("webhook token %q, want 32 random hex digits", hookToken)
	}
	other, err := prepareDir(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	if readTrimmed(t, other.path(WebhookTokenFile)) == hookToken {
		t.Error("two data dirs have the same webhook token")
	}
	if !strings.Contains(before[hookRel], `"token": "`+hookToken+`"`) {
		t.Errorf("the example webhook does not hold the token of %s:\n%s", WebhookTokenFile, before[hookRel])
	}
	before[hookRel] = strings.Replace(before[hookRel], hookToken, "mine", 1)
	if err := os.WriteFile(filepath.Join(dir, hookRel), []byte(before[hookRel]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "master"), 0o700); err != nil {
		t.Fatal(err)
	}
	d2, err := prepareDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d2.firstStart {
		t.Error("a restart counted as the first start")
	}
	for _, f := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != before[f] {
			t.Errorf("%s changed on restart:\n%s\nwas:\n%s", f, b, before[f])
		}
	}
	key, err := auth.LoadHMACKey(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	v := auth.Verifier{HMACKey: key}
	for _, tc := range []struct {
		token, user string
		perm        auth.Permission
	}{{d.adminToken, "admin", auth.Admin}, {d2.adminToken, "admin", auth.Admin}, {d2.engineToken, "squall-engine", auth.View}} {
		c, err := v.Verify("Bearer " + tc.token)
		if err != nil || c.User != tc.user {
			t.Fatalf("token of %s: %v %+v", tc.user, err, c)
		}
		if _, err := c.Scope("all", tc.perm); err != nil {
			t.Errorf("token of %s: %v", tc.user, err)
		}
	}
	if c, _ := v.Verify("Bearer " + d2.engineToken); c != nil {
		if _, err := c.Scope("all", auth.Edit); err == nil {
			t.Error("the engine's token may edit")
		}
	}
}

// TestLateHandler: a route whose component is still starting answers 503
// in JSON with Retry-After, then the component's answer once it exists.
func TestLateHandler(t *testing.T) {
	t.Parallel()
	var h http.Handler
	late := lateHandler("the engine", func() http.Handler { return h })
	rec := httptest.NewRecorder()
	late.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code != "NOT_READY" || e.Message != "the engine is starting" {
		t.Fatalf("starting: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	rec = httptest.NewRecorder()
	late.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("started: %d", rec.Code)
	}
}

// TestPrepareDir_legacyWebhook: a data dir of an older version, whose
// example webhook still holds the fixed token example-token, gets a random
// token (in the file and in webhook.token) and keeps everything else; an
// edited webhook file is left alone.
func TestPrepareDir_legacyWebhook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content string
		replaced      bool
	}{
		{"unchanged seed", fmt.Sprintf(exampleWebhook, legacyWebhookToken), true},
		{"edited", strings.Replace(fmt.Sprintf(exampleWebhook, legacyWebhookToken), `"disk_alert"`, `"disk"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			hook := filepath.Join(dir, webhooksDir, WebhookID+".json")
			if err := os.MkdirAll(filepath.Join(dir, webhooksDir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(hook, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := prepareDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := readTrimmed(t, hook)
			if !tc.replaced {
				if got != strings.TrimSpace(tc.content) || d.tokenReplaced {
					t.Fatalf("an edited webhook changed:\n%s", got)
				}
				return
			}
			token := readTrimmed(t, filepath.Join(dir, WebhookTokenFile))
			if !d.tokenReplaced || strings.Contains(got, legacyWebhookToken) || len(token) != 32 ||
				got != strings.TrimSpace(fmt.Sprintf(exampleWebhook, token)) {
				t.Fatalf("replaced %t, token %q, webhook:\n%s", d.tokenReplaced, token, got)
			}
			if _, err := os.Stat(hook + ".tmp"); err == nil {
				t.Error("the temporary file is left behind")
			}
		})
	}
}

// TestHostCheck: the Host check of squall dev, request by request.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, tc := range []struct {
		listen, host string
		want         int
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", 200},
		{"127.0.0.1:8080", "localhost:8080", 200},
		{"127.0.0.1:8080", "localhost", 200},
		{"127.0.0.1:8080", "127.0.0.1", 200},
		{"127.0.0.1:8080", "127.1.2.3:9", 200},
		{"127.0.0.1:8080", "[::1]:8080", 200},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", 200},
		{"dev.lan:8080", "dev.lan:8080", 200},
		{"dev.lan:8080", "DEV.lan", 200},
		{"127.0.0.1:8080", "evil.example", 421},
		{"127.0.0.1:8080", "evil.example:8080", 421},
		{"127.0.0.1:8080", "localhost.evil.example", 421},
		{"127.0.0.1:8080", "10.0.0.1:8080", 421},
		{"127.0.0.1:8080", "", 421},
		{":8080", "", 421},
		{":8080", "evil.example", 421},
		{"0.0.0.0:8080", "192.168.1.5:8080", 421},
		{"0.0.0.0:8080", "localhost:8080", 200},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v2_beta/x", nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		hostCheck(tc.listen, ok).ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("listen %s, Host %q: %d, want %d", tc.listen, tc.host, w.Code, tc.want)
		}
		var e struct {
			Code   string         `json:"code"`
			Params map[string]any `json:"params"`
		}
		if tc.want == 421 && (json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Code != "MISDIRECTED_REQUEST" || e.Params["host"] != tc.host ||
			w.Header().Get("Content-Type") != "application/json") {
			t.Errorf("Host %q: error body %s", tc.host, w.Body)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func readTrimmed(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
