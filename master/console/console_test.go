package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix, c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, b := calltest.Do(t, calltest.Client().Transport.RoundTrip, req) // no redirect following
	return resp, string(b)
}

// TestConsole_ServeHTTP: the page and its assets with their types, the
// security headers on every answer, JSON 404s for unknown files and
// folders (never a listing), 405 for writes, revalidation with ETags.
func TestConsole_ServeHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	for _, tc := range []struct {
		name, method, path string
		status             int
		ctype, body        string
	}{
		{"index", "GET", "/ui/", 200, "text/html; charset=utf-8", "<title>Squall console</title>"},
		{"index by name", "GET", "/ui/index.html", 200, "text/html; charset=utf-8", "<title>Squall console</title>"},
		{"script", "GET", "/ui/js/app.js", 200, "text/javascript; charset=utf-8", "import"},
		{"style", "GET", "/ui/console.css", 200, "text/css; charset=utf-8", ":root"},
		{"icon", "GET", "/ui/squall.svg", 200, "image/svg+xml", "<svg"},
		{"head", "HEAD", "/ui/", 200, "text/html; charset=utf-8", ""},
		{"folder", "GET", "/ui/js/", 404, "application/json", `"code":"NOT_FOUND"`},
		{"folder without slash", "GET", "/ui/js", 404, "application/json", `"code":"NOT_FOUND"`},
		{"unknown", "GET", "/ui/nope.js", 404, "application/json", `"code":"NOT_FOUND"`},
		{"encoded traversal", "GET", "/ui/%2e%2e/console.go", 404, "application/json", `"code":"NOT_FOUND"`},
		{"source", "GET", "/ui/console.go", 404, "application/json", `"code":"NOT_FOUND"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.method, srv.URL+tc.path, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body lacks %q: %.200s", tc.body, body)
			}
			if tc.method == "HEAD" && body != "" {
				t.Errorf("HEAD answered a body: %.100s", body)
			}
			if tc.status == 404 {
				var e struct {
					Code    string         `json:"code"`
					Params  map[string]any `json:"params"`
					Message string         `json:"message"`
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Params == nil || e.Message == "" {
					t.Errorf("404 body is not the JSON error form: %s (%v)", body, err)
				}
			}
			for k, want := range map[string]string{
				"Content-Security-Policy": ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"X-Frame-Options":         "DENY",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestConsole_Methods: only GET and HEAD, even when mounted for every
// method.
func TestConsole_Methods(t *testing.T) {
	t.Parallel()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		resp, body := do(t, m, srv.URL+"/ui/", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(body, "METHOD_NOT_ALLOWED") {
			t.Errorf("%s: %d Allow %q %s", m, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
}

// TestConsole_Traversal: a path with dot segments reaching the handler
// (the mux cleans them first, but the handler does not rely on it)
// names no asset.
func TestConsole_Traversal(t *testing.T) {
	t.Parallel()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/ui/../console.go", "/ui/js/../index.html", "/ui//index.html", "/x/ui/index.html", "/ui"} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), "GET", "http://h"+p, nil))
		if w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
}

// TestConsole_Caching: assets are revalidated on every use and a
// matching ETag answers 304 without a body; a changed asset would have
// another ETag.
func TestConsole_Caching(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	resp, _ := do(t, "GET", srv.URL+"/ui/js/app.js", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q Cache-Control %q, want an ETag and no-cache", etag, resp.Header.Get("Cache-Control"))
	}
	resp, body := do(t, "GET", srv.URL+"/ui/js/app.js", http.Header{"If-None-Match": {etag}})
	if resp.StatusCode != http.StatusNotModified || body != "" {
		t.Errorf("If-None-Match: %d %q, want 304 and no body", resp.StatusCode, body)
	}
	other, _ := do(t, "GET", srv.URL+"/ui/console.css", nil)
	if other.Header.Get("ETag") == etag {
		t.Error("two assets share an ETag")
	}
	resp, _ = do(t, "GET", srv.URL+"/ui/nope", nil)
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("404 Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
}

// TestAssets_NoInlineOrRemote: the page runs under the CSP: no inline
// script, style or event handler attribute, and nothing from another
// origin, in any asset.
func TestAssets_NoInlineOrRemote(t *testing.T) {
	t.Parallel()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
	for _, bad := range []struct {
		what string
		re   *regexp.Regexp
	}{
		{"inline script", inlineScript},
		{"script without src", regexp.MustCompile(`<script(?:(?:\s+[a-z-]+(?:="[^"]*")?)*)>`)},
		{"style element", regexp.MustCompile(`<style`)},
		{"style attribute", regexp.MustCompile(`\sstyle=`)},
		{"handler attribute", regexp.MustCompile(`\son[a-z]+=`)},
		{"remote URL", regexp.MustCompile(`(?:src|href)="(?:https?:)?//`)},
		{"javascript URL", regexp.MustCompile(`javascript:`)},
		{"innerHTML", regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`)},
	} {
		for name, a := range c.files {
			if loc := bad.re.FindIndex(a.body); loc != nil && !(bad.what == "script without src" && strings.Contains(string(a.body[loc[0]:loc[1]]), "src=")) {
				t.Errorf("%s: %s at %q", name, bad.what, a.body[loc[0]:min(loc[1]+20, len(a.body))])
			}
		}
	}
	if !inlineScript.MatchString("<script>alert(1)</script>") {
		t.Error("the inline-script pattern does not match an inline script")
	}
}

// TestNew_Dev: squall dev's page is marked data-mode="dev" (it offers the
// test event of the dev example tree); a master's is not, and the two
// pages have different ETags.
func TestNew_Dev(t *testing.T) {
	t.Parallel()
	for _, dev := range []bool{false, true} {
		c, err := New(Options{Dev: dev})
		if err != nil {
			t.Fatal(err)
		}
		page := c.files["index.html"]
		if got := strings.Contains(string(page.body), `data-mode="dev"`); got != dev {
			t.Errorf("dev %v: the page is marked dev: %v", dev, got)
		}
		if !strings.Contains(string(page.body), "<html lang=\"en\"") {
			t.Errorf("dev %v: the page lost its html tag", dev)
		}
	}
	a, _ := New(Options{})
	b, _ := New(Options{Dev: true})
	if a.files["index.html"].etag == b.files["index.html"].etag {
		t.Error("the dev page has the master page's ETag")
	}
}
