package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

// testAPI is a tiny API mounted OnLeader under /api/v2_beta/test/, the
// way the configuration API is: an echo, and an append-only write to the
// active tree (read-modify-write, as the real API does).
type testAPI struct {
	srv *master.Server
	mu  sync.Mutex
}

// mountTestAPI is the WithSetup option that mounts the test API.
func mountTestAPI() mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) {
		a := &testAPI{srv: s}
		if err := s.Mount("/api/v2_beta/test/", a.handler(), master.OnLeader); err != nil {
			panic(err)
		}
	})
}

// echo is what the echo route answers.
type echo struct {
	Node   string `json:"node"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query"`
	Auth   string `json:"auth"`
	Custom string `json:"custom"`
	Body   string `json:"body"`
}

func (a *testAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v2_beta/test/echo/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", "yes")
		w.Header().Set("X-Seen-Forwarded-By", r.Header.Get(master.HeaderForwardedBy))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(echo{
			Node: a.srv.ID(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Custom: r.Header.Get("X-Custom"), Body: string(body),
		})
	})
	mux.HandleFunc("POST /api/v2_beta/test/append/{name}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		tree, _ := a.srv.Store().Active()
		tree.Children = append(tree.Children, &config.Node{Kind: config.KindFilter, Name: r.PathValue("name"), Active: true})
		a.replaceActive(w, r, tree)
	})
	mux.HandleFunc("POST /api/v2_beta/test/replace/{name}", func(w http.ResponseWriter, r *http.Request) {
		tree := config.NewRoot()
		tree.Children = []*config.Node{{Kind: config.KindFilter, Name: r.PathValue("name"), Active: true}}
		a.replaceActive(w, r, tree)
	})
	return mux
}

// replaceActive makes tree the active tree and answers its index, or 503
// with Retry-After when the store refused it.
func (a *testAPI) replaceActive(w http.ResponseWriter, r *http.Request, tree *config.Node) {
	idx, err := a.srv.Store().ReplaceActive(r.Context(), tree)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"index":%d}`, idx)
}

// asyncAnswer is an answer read whole (its body and headers), or in err
// why there is none.
type asyncAnswer struct {
	status int
	body   string
	header http.Header
	err    error
}

// sendAsync sends req from a goroutine, which may not fail the test, and
// delivers its answer.
func sendAsync(req *http.Request) <-chan asyncAnswer {
	ch := make(chan asyncAnswer, 1)
	go func() {
		resp, err := calltest.Client().Do(req)
		if err != nil {
			ch <- asyncAnswer{header: http.Header{}, err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- asyncAnswer{status: resp.StatusCode, body: string(b), header: resp.Header}
	}()
	return ch
}

// post sends a request without testing.T, for writer goroutines.
func post(ctx context.Context, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := calltest.Client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// appendVia writes child name through node i and fails the test unless
// it is acknowledged.
func appendVia(t *testing.T, c *mastertest.Cluster, i int, name string) uint64 {
	t.Helper()
	return appendUntil(t, c, i, name, time.Time{})
}

// appendEventually is appendVia for a moment when a leader may still be
// being elected: a 503 NO_LEADER is retried for up to 20 s.
func appendEventually(t *testing.T, c *mastertest.Cluster, i int, name string) uint64 {
	t.Helper()
	return appendUntil(t, c, i, name, time.Now().Add(20*time.Second))
}

// appendUntil appends a child through node i, retrying 503s until the
// deadline (each attempt is paced by LeaderWait), and returns its index.
func appendUntil(t *testing.T, c *mastertest.Cluster, i int, name string, deadline time.Time) uint64 {
	t.Helper()
	for {
		resp, body := c.Do(i, http.MethodPost, "/api/v2_beta/test/append/"+name, "", nil)
		if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("append %s via node %d: %d %s", name, i, resp.StatusCode, body)
		}
		var r struct{ Index uint64 }
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r.Index
	}
}

// childNames lists the names of the active tree's root children on node i.
func childNames(c *mastertest.Cluster, i int) []string {
	tree, _ := c.Server(i).Store().Active()
	var names []string
	for _, n := range tree.Children {
		names = append(names, n.Name)
	}
	return names
}

// hasAll reports whether have holds every name of want.
func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// apiErr is the JSON error body of decision 16.
type apiErr struct {
	Code    string            `json:"code"`
	Params  map[string]string `json:"params"`
	Message string            `json:"message"`
}

// wantError checks an error answer: status, JSON body with the code.
func wantError(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	var e apiErr
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d (%s), want %d: %s", resp.StatusCode, resp.Header.Get("Content-Type"), status, body)
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code != code || e.Message == "" || e.Params == nil {
		t.Fatalf("error body %s (%v), want code %s", body, err, code)
	}
	if status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("503 without Retry-After: 1: %v", resp.Header)
	}
}

// viewToken has view on root; tenantToken has admin below root only.
func viewToken(c *mastertest.Cluster) string {
	return c.Token(auth.Claims{User: "viewer", Auths: map[string]auth.Authorization{
		"all": {Path: []string{"root"}, Roles: []string{"view"}},
	}})
}

func tenantAdminToken(c *mastertest.Cluster) string {
	return c.Token(auth.Claims{User: "tenant", Auths: map[string]auth.Authorization{
		"acme": {Path: []string{"root", "acme"}, Roles: []string{"admin"}},
	}})
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, body)
	}
	return v
}

// postJoin posts a join request to the member at base, with the join
// secret in its header unless secret is empty.
func postJoin(t *testing.T, base, secret, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/squall/v1/cluster/join", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	// A refused join is answered without reading the body, and the
	// connection closed: a client that wrote a large body first would see
	// a reset instead of the answer. Well-behaved clients of large bodies
	// ask before sending it, as this one does.
	if len(body) > 64<<10 {
		req.Header.Set("Expect", "100-continue")
	}
	if secret != "" {
		req.Header.Set(master.HeaderJoinToken, secret)
	}
	tr := &http.Transport{ExpectContinueTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	return calltest.Do(t, (&http.Client{Transport: tr}).Do, req)
}
