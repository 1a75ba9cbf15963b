// Package apitest drives the HTTP APIs of running squall processes for the
// tests that start the binary: a call that never fails the test, the
// deployment of a whole tree, and the /readyz answers of the engine and
// the satellite.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
)

// Call sends a request with the token (if any) and returns the status and
// up to 1 MiB of the body; 0 and nil when no answer came within 10 s.
func Call(ctx context.Context, method, url, token string, body io.Reader, contentType string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := calltest.Client()
	c.Timeout = 10 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// MustCall sends a request with the token and a JSON body and returns
// the answer's body; any other answer than 200 fails the test.
func MustCall(t testing.TB, method, url, token, body string) []byte {
	t.Helper()
	code, b := Call(t.Context(), method, url, token, strings.NewReader(body), "application/json")
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, code, b)
	}
	return b
}

// NewDraft creates a draft on the master at base and returns its id.
func NewDraft(t testing.TB, base, token string) string {
	t.Helper()
	var draft struct {
		ID string `json:"id"`
	}
	code, body := Call(t.Context(), http.MethodPost, base+"/api/v2_beta/config/drafts/all", token, nil, "")
	if code != http.StatusOK || json.Unmarshal(body, &draft) != nil || draft.ID == "" {
		t.Fatalf("create draft: %d %s", code, body)
	}
	return draft.ID
}

// AddRuleset adds an empty ruleset named name below the root of draft.
func AddRuleset(t testing.TB, base, token, draft, name string) {
	t.Helper()
	MustCall(t, http.MethodPost, base+"/api/v2_beta/config/draft/tree/details/all/"+draft+"/root", token, `{"type":"Ruleset","name":"`+name+`"}`)
}

// Deploy deploys draft with a message (none when empty).
func Deploy(t testing.TB, base, token, draft, message string) {
	t.Helper()
	u := base + "/api/v2_beta/config/drafts/all/" + draft + "/deploy"
	if message != "" {
		u += "?message=" + url.QueryEscape(message)
	}
	MustCall(t, http.MethodPost, u, token, "")
}

// DeployTree creates a draft on the master at base, imports tree as the
// whole tree and deploys it.
func DeployTree(t testing.TB, base, token string, tree []byte) {
	t.Helper()
	id, code, body := ImportTree(t, base, token, "root", tree)
	if code != http.StatusOK {
		t.Fatalf("import tree: %d %s", code, body)
	}
	Deploy(t, base, token, id, "")
}

// ImportTree creates a draft and imports tree as its whole tree (root is
// the name of the active tree's root); it returns the draft's id and the
// import's answer.
func ImportTree(t testing.TB, base, token, root string, tree []byte) (id string, code int, body []byte) {
	t.Helper()
	id = NewDraft(t, base, token)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "tree.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(tree); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	code, body = Call(t.Context(), http.MethodPut, base+"/api/v2_beta/config/draft/tree/import/all/"+id+"/"+root, token, &form, mw.FormDataContentType())
	return id, code, body
}

// EngineStatus is an engine's /readyz.
type EngineStatus struct {
	Ready      bool   `json:"ready"`
	TreeIndex  uint64 `json:"tree_index"`
	Partitions []int  `json:"partitions"`
}

// SatelliteStatus is a satellite's /readyz.
type SatelliteStatus struct {
	Ready bool   `json:"ready"`
	Mode  string `json:"mode"`
	Spool struct {
		Records int64 `json:"records"`
	} `json:"spool"`
}

// Ready reads the /readyz answer of the process at base into v; v stays
// as it is when none comes.
func Ready(base string, v any) {
	if _, body := Call(context.Background(), http.MethodGet, base+"/readyz", "", nil, ""); body != nil {
		_ = json.Unmarshal(body, v)
	}
}
