package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
)

// bodyRoutes are the routes that read a body, with a draft id to fill in.
var bodyRoutes = []struct{ method, path string }{
	{"POST", cfgPath + "/draft/tree/details/m/%s/master,new"},
	{"PUT", cfgPath + "/draft/tree/details/m/%s/master"},
	{"POST", cfgPath + "/draft/rule/details/m/%s/master,archive"},
	{"PUT", cfgPath + "/draft/rule/details/m/%s/master,archive/a1"},
	{"PUT", cfgPath + "/draft/rule/move/m/%s/master,archive/a1"},
	{"POST", cfgPath + "/draft/tree/import/m/%s/master"},
	{"PUT", cfgPath + "/draft/tree/import/m/%s/master"},
	{"POST", "/api/v2_beta/event/active/m"},
	{"POST", "/api/v2_beta/event/draft/m/%s"},
	{"POST", "/api/v2_beta/event/drafts/m/%s"},
}

func fill(path, id string) string { return strings.ReplaceAll(path, "%s", id) }

// TestAuthBeforeBody: every route that takes a body authenticates and
// checks the permission from the headers and the URL before it reads a
// byte of it: bad JSON without a token is a 401 (it was a 400), with a
// token that lacks the permission a 403, and a body that never arrives
// does not delay the answer.
func TestAuthBeforeBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	noView := token("carol", nil)
	for _, rt := range bodyRoutes {
		path := fill(rt.path, id)
		t.Run(rt.method+" "+path, func(t *testing.T) {
			outer := e.t
			e.t = t // the subtests run one after the other
			defer func() { e.t = outer }()
			e.expect(e.send(rt.method, path, "", "{not json"), http.StatusUnauthorized, "UNAUTHORIZED")
			e.expect(e.send(rt.method, path, "garbage", "{not json"), http.StatusUnauthorized, "UNAUTHORIZED")
			e.expect(e.send(rt.method, path, noView, "{not json"), http.StatusForbidden, "MISSING_REQUIRED_PERMISSIONS")

			// A body that never ends, sent to the leader: the answer
			// comes without it, and the connection is closed.
			pr, pw := io.Pipe()
			defer pw.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, rt.method, e.cluster.URL(e.cluster.Leader())+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := calltest.Client().Do(req)
			if err != nil {
				t.Fatalf("no answer without the body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("status %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
			}
		})
	}
}

// TestToError_BodyTimeout: a body cut by the body deadline is a 408.
func TestToError_BodyTimeout(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("read body: %w", os.ErrDeadlineExceeded)
	if e := toError(err); e.Status != http.StatusRequestTimeout || e.Code != "REQUEST_TIMEOUT" {
		t.Fatalf("got %d %s, want 408 REQUEST_TIMEOUT", e.Status, e.Code)
	}
	if _, err := readAll(&http.Request{Body: io.NopCloser(timeoutReader{})}); toError(err).Status != http.StatusRequestTimeout {
		t.Fatalf("readAll: %v, want it to keep the timeout", err)
	}
}

type timeoutReader struct{}

func (timeoutReader) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }
