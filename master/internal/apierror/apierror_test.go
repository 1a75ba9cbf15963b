package apierror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// TestCommon: the errors every API answers alike. A command proposed by a
// leader that lost its leadership before it committed may still commit:
// LEADER_LOST, as a follower answers when its leader failed with the
// request; a node that knew it did not lead answers NO_LEADER (nothing
// was proposed).
func TestCommon(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{"leadership lost", &store.NotLeaderError{Err: store.ErrLeadershipLost}, 503, CodeLeaderLost, true},
		{"leadership lost wrapped", fmt.Errorf("apply deploy: %w", &store.NotLeaderError{LeaderID: "m3", Err: store.ErrLeadershipLost}), 503, CodeLeaderLost, true},
		{"not leader", &store.NotLeaderError{LeaderID: "m3"}, 503, CodeNoLeader, true},
		{"store timeout", store.ErrTimeout, 503, CodeNoLeader, true},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), 503, CodeUnavailable, true},
		{"unauthenticated", fmt.Errorf("verify: %w", auth.ErrUnauthenticated), 401, "UNAUTHORIZED", false},
		{"forbidden", auth.ErrForbidden, 403, "FORBIDDEN", false},
		{"too large", &http.MaxBytesError{Limit: 10}, 413, "PAYLOAD_TOO_LARGE", false},
		{"idempotency key", store.ErrRequestMismatch, 422, "IDEMPOTENCY_KEY_REUSED", false},
		{"answer", fmt.Errorf("x: %w", Errorf(http.StatusTeapot, "TEAPOT", "short and stout")), 418, "TEAPOT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := Common(tc.err)
			if e == nil {
				t.Fatalf("Common(%v) = nil", tc.err)
			}
			if e.Status != tc.status || e.Code != tc.code || (e.RetryAfter > 0) != tc.retryAfter {
				t.Errorf("Common(%v) = %d %s (Retry-After %d), want %d %s", tc.err, e.Status, e.Code, e.RetryAfter, tc.status, tc.code)
			}
		})
	}
	if e := Common(errors.New("disk on fire")); e != nil {
		t.Errorf("Common of an unknown error = %v, want nil", e)
	}
}

// TestError_Public: a 500 is answered with a request id and none of its
// text; other answers are sent as they are.
func TestError_Public(t *testing.T) {
	t.Parallel()
	e := Internal(errors.New("open /var/lib/squall/state.db: input/output error"))
	pub, id := e.Public()
	if id == "" || pub.Params[ParamRequestID] != id || strings.Contains(pub.Message, "state.db") {
		t.Fatalf("Public() = %+v, %q: want the request id in params, and no internal text", pub, id)
	}
	if _, id2 := e.Public(); id2 == id {
		t.Errorf("two answers share the request id %s", id)
	}
	rec := httptest.NewRecorder()
	Write(rec, pub)
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "state.db") || !strings.Contains(rec.Body.String(), id) || rec.Header().Get(httpguard.HeaderRequestID) != id {
		t.Errorf("written: %d %v %s, want the request id %s in the body and header", rec.Code, rec.Header(), rec.Body, id)
	}

	nf := Errorf(http.StatusNotFound, "NOT_FOUND", "no such draft")
	if pub, id := nf.Public(); pub != nf || id != "" {
		t.Errorf("Public() of a 404 = %+v, %q, want it unchanged", pub, id)
	}
}

// TestWithNoRoute: a request a route matches is served by it; any other
// gets NoRoute's answer through the writer given: 405 with the mux's
// Allow header when the path has routes for other methods, else 404.
func TestWithNoRoute(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	})
	var written []string
	h := WithNoRoute(mux, func(w http.ResponseWriter, r *http.Request, e *Error) {
		written = append(written, r.Method+" "+e.Code)
		Write(w, e)
	})
	for _, tc := range []struct {
		name, method, path string
		status             int
		allow, body        string
	}{
		{"route", "GET", "/things/7", http.StatusOK, "", `{"id":"7"}`},
		{"other method", "DELETE", "/things/7", http.StatusMethodNotAllowed, "GET, HEAD",
			`{"code":"METHOD_NOT_ALLOWED","params":{},"message":"DELETE is not allowed on /things/7"}`},
		{"no route", "GET", "/nothing", http.StatusNotFound, "",
			`{"code":"NOT_FOUND","params":{},"message":"no such endpoint: GET /nothing"}`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), tc.method, tc.path, nil))
		if rec.Code != tc.status || rec.Header().Get("Allow") != tc.allow || strings.TrimSpace(rec.Body.String()) != tc.body {
			t.Errorf("%s: %d Allow %q %s, want %d Allow %q %s", tc.name, rec.Code, rec.Header().Get("Allow"), rec.Body, tc.status, tc.allow, tc.body)
		}
	}
	if want := []string{"DELETE METHOD_NOT_ALLOWED", "GET NOT_FOUND"}; strings.Join(written, ",") != strings.Join(want, ",") {
		t.Errorf("written %v, want %v", written, want)
	}
}

// TestIsBodyCut: a body cut by its size limit or its deadline, wrapped or
// not, is told from the other errors of reading a body.
func TestIsBodyCut(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&http.MaxBytesError{Limit: 10},
		fmt.Errorf("multipart body: %w", &http.MaxBytesError{Limit: 10}),
		fmt.Errorf("read: %w", os.ErrDeadlineExceeded),
	} {
		if !IsBodyCut(err) {
			t.Errorf("IsBodyCut(%v) = false, want true", err)
		}
	}
	if err := errors.New("unexpected EOF"); IsBodyCut(err) {
		t.Errorf("IsBodyCut(%v) = true, want false", err)
	}
}
