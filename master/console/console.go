package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path under which the console is served. Mount the
// handler with the pattern "GET " + Prefix.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every answer: the page, its
// scripts, styles, images and API calls come from its own origin only;
// no inline script or style, no plugin, no framing, no form posts.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentType is the type of an asset's extension; "" for an extension
// the console does not use (New refuses such an asset).
func contentType(ext string) string {
	switch ext {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return ""
}

//go:embed assets
var assets embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Console serves the embedded assets.
type Console struct {
	files map[string]asset // by name below Prefix; "" is index.html
}

// Options are the settings of a console.
type Options struct {
	// Dev marks the page as squall dev's (<html data-mode="dev">): it
	// offers what only squall dev has, such as the test event of its
	// example tree.
	Dev bool
}

// htmlTag is index.html's opening tag, htmlTagDev squall dev's.
const (
	htmlTag    = `<html lang="en">`
	htmlTagDev = `<html lang="en" data-mode="dev">`
)

// New returns the console with its assets loaded from the embedded files.
func New(o Options) (*Console, error) {
	c := &Console{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		if p == "assets/index.html" && o.Dev {
			if !bytes.Contains(body, []byte(htmlTag)) {
				return fmt.Errorf("%s: no %s to mark as squall dev's", p, htmlTag)
			}
			body = bytes.Replace(body, []byte(htmlTag), []byte(htmlTagDev), 1)
		}
		ct := contentType(path.Ext(p))
		if ct == "" {
			return fmt.Errorf("%s: no content type for its extension", p)
		}
		sum := sha256.Sum256(body)
		c.files[strings.TrimPrefix(p, "assets/")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	if _, ok := c.files["index.html"]; !ok {
		return nil, fmt.Errorf("console assets: no index.html")
	}
	return c, nil
}

// ServeHTTP serves the asset the path names below Prefix; the folder
// itself is index.html. Assets are revalidated on every use (no-cache
// with an ETag): a new binary's console is never mixed with an old one.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	a, found := c.files[name]
	if !ok || !found {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such console file: "+r.URL.Path)
		return
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// writeError writes the JSON error body of every Squall API.
func writeError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(struct {
		Code    string         `json:"code"`
		Params  map[string]any `json:"params"`
		Message string         `json:"message"`
	}{code, map[string]any{}, message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
