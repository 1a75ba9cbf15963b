package master_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// takeOverAPI is a route mounted with RequestIDs on every node whose
// PATCH hands the draft over to the user named by its body (one raft
// command, submitted with the request's context, as the real handlers
// do). On the node named by block it waits for gate first (before) or
// after its command committed (after): a leader that dies with the
// request.
type takeOverAPI struct {
	draft   string
	block   atomic.Pointer[string]
	after   bool
	gate    chan struct{}
	entered chan string
}

const takeOverPrefix = "/api/v2_beta/takeover/"

type takeOverAnswer struct {
	Node     string `json:"node"`
	Replayed bool   `json:"replayed"`
	Index    uint64 `json:"index"`
}

func (a *takeOverAPI) option() mastertest.Option {
	return mastertest.WithSetup(func(_ int, s *master.Server) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			blocked := func() bool { b := a.block.Load(); return b != nil && *b == s.ID() }
			wait := func() {
				a.entered <- s.ID()
				select {
				case <-a.gate:
				case <-r.Context().Done():
				}
			}
			if blocked() && !a.after {
				wait()
				if !s.Store().IsLeader() {
					http.Error(w, "not the leader any more", http.StatusServiceUnavailable)
					return
				}
			}
			res, err := s.Store().Apply(r.Context(), store.SessionFromContext(r.Context()), store.TakeOver{ID: a.draft, User: string(body)})
			if err != nil || res.Err != nil {
				http.Error(w, fmt.Sprint(err, res.Err), http.StatusServiceUnavailable)
				return
			}
			if blocked() && a.after {
				wait()
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(takeOverAnswer{Node: s.ID(), Replayed: res.Replayed, Index: res.Index})
		})
		if err := s.Mount(takeOverPrefix, h, master.OnLeader, master.RequestIDs()); err != nil {
			panic(err)
		}
	})
}

// TestForward_ResentWriteAppliedOnce: a leader fails while it has a PATCH
// forwarded by a follower, once after the PATCH's command committed and
// once before it was submitted. Either way the follower sends it again to
// the new leader, with the same request id, and the PATCH takes effect
// once: the resend finds the committed command in the state machine's
// table (and changes nothing), or applies it.
func TestForward_ResentWriteAppliedOnce(t *testing.T) {
	t.Parallel()
	for _, after := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", after), func(t *testing.T) {
			t.Parallel()
			a := &takeOverAPI{after: after, gate: make(chan struct{}), entered: make(chan string, 8)}
			c := mastertest.TestCluster(t, 3, a.option())
			t.Cleanup(func() { close(a.gate) })
			old := c.Leader()
			id, err := c.Server(old).Store().CreateDraft(t.Context(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			a.draft = id
			oldID := c.Server(old).ID()
			a.block.Store(&oldID)
			f := c.Followers()[0]

			type result struct {
				resp *http.Response
				body []byte
			}
			done := make(chan result, 1)
			go func() {
				resp, body := c.Do(f, http.MethodPatch, takeOverPrefix+"x", c.AdminToken, []byte("bob"))
				done <- result{resp, body}
			}()
			select {
			case <-a.entered:
			case <-time.After(mastertest.Timeout):
				t.Fatal("the request did not reach the leader")
			}
			fs := c.Server(f).Store()
			var committed uint64
			if after {
				deadline := time.Now().Add(mastertest.Timeout)
				for {
					if d, err := fs.Draft(); err == nil && d.Owner == "bob" {
						committed = fs.Index()
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the take over did not commit")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			c.Partition(old)
			t.Cleanup(func() { c.Heal(old) })

			res := <-done
			if res.resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d %s, want 200", res.resp.StatusCode, res.body)
			}
			if res.resp.Header.Get(master.HeaderResent) != "true" {
				t.Errorf("answer without %s: true", master.HeaderResent)
			}
			var ans takeOverAnswer
			if err := json.Unmarshal(res.body, &ans); err != nil {
				t.Fatal(err)
			}
			if ans.Node == oldID {
				t.Fatalf("answered by the old leader: %s", res.body)
			}
			if ans.Replayed != after {
				t.Fatalf("replayed %v, want %v: %s", ans.Replayed, after, res.body)
			}
			if after && fs.Index() != committed {
				// Reading the follower's index once the new leader
				// answered: nothing after the first commit changed it.
				t.Logf("follower index %d, first commit %d", fs.Index(), committed)
			}
			d, err := c.Server(c.Leader()).Store().Draft()
			if err != nil || d.Owner != "bob" {
				t.Fatalf("draft %+v %v, want owned by bob", d, err)
			}
			if after && ans.Index < committed {
				t.Fatalf("answer index %d before the first commit %d", ans.Index, committed)
			}
		})
	}
}

// TestIdempotencyKey: a client's retry with the same Idempotency-Key, on
// any node, is answered from the first outcome without applying again;
// the same key with another body is a 422.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := &takeOverAPI{gate: make(chan struct{}), entered: make(chan string, 1)}
	c := mastertest.TestCluster(t, 3, a.option())
	t.Cleanup(func() { close(a.gate) })
	id, err := c.Server(c.Leader()).Store().CreateDraft(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	a.draft = id
	do := func(i int, key, body string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, c.URL(i)+takeOverPrefix+"x", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		req.Header.Set(master.HeaderIdempotencyKey, key)
		resp, b := calltest.Do(t, calltest.Client().Do, req)
		return resp, b
	}
	var first takeOverAnswer
	for n, i := range []int{c.Followers()[0], c.Leader(), c.Followers()[1]} {
		resp, body := do(i, "k1", "bob")
		var ans takeOverAnswer
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil {
			t.Fatalf("attempt %d: %d %s", n, resp.StatusCode, body)
		}
		if n == 0 {
			first = ans
			continue
		}
		if !ans.Replayed {
			t.Fatalf("attempt %d applied again: %s", n, body)
		}
	}
	if first.Replayed {
		t.Fatal("the first attempt replayed")
	}
	resp, body := do(c.Followers()[0], "k1", "carol")
	wantError(t, resp, body, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
	// Another caller's same key is another request.
	other := c.Token(auth.Claims{User: "mallory"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, c.URL(c.Leader())+takeOverPrefix+"x", strings.NewReader("mallory"))
	req.Header.Set("Authorization", "Bearer "+other)
	req.Header.Set(master.HeaderIdempotencyKey, "k1")
	r2, b2 := calltest.Do(t, calltest.Client().Do, req)
	var ans takeOverAnswer
	if r2.StatusCode != http.StatusOK || json.Unmarshal(b2, &ans) != nil || ans.Replayed {
		t.Fatalf("another caller's key: %d %s, want applied", r2.StatusCode, b2)
	}
}

// TestRequestIDs_Filter: the writes a mount's filter excludes (the
// config API's test events) get no request id, so they are not resent;
// the others get one on the node that receives them, kept when forwarded,
// and reads get none.
func TestRequestIDs_Filter(t *testing.T) {
	t.Parallel()
	const prefix = "/api/v2_beta/ids/"
	var seen sync.Map // path -> request id the leader saw
	c := mastertest.TestCluster(t, 3, mastertest.WithSetup(func(_ int, s *master.Server) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Store(r.Method+" "+r.URL.Path, r.Header.Get(master.HeaderRequestID))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "null")
		})
		noEvents := func(r *http.Request) bool { return !strings.HasSuffix(r.URL.Path, "/event") }
		if err := s.Mount(prefix, h, master.OnLeader, master.RequestIDs(noEvents)); err != nil {
			panic(err)
		}
	}))
	f := c.Followers()[0]
	for _, tc := range []struct {
		method, path string
		id           bool
	}{
		{http.MethodPost, prefix + "write", true},
		{http.MethodPost, prefix + "event", false},
		{http.MethodGet, prefix + "read", false},
	} {
		resp, body := c.Do(f, tc.method, tc.path, c.AdminToken, []byte(`{}`))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
		v, _ := seen.Load(tc.method + " " + tc.path)
		if id, _ := v.(string); (id != "") != tc.id || (tc.id && len(id) != 32) {
			t.Errorf("%s %s: the leader saw request id %q, want one: %v", tc.method, tc.path, id, tc.id)
		}
	}
}
