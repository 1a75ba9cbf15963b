package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// failingStore fails every read of the draft with an error whose text
// must stay on the server.
type failingStore struct{ Store }

const internalDetail = "open /var/lib/squall/state.db: input/output error"

func (failingStore) DraftView() (*store.Draft, error) { return nil, errors.New(internalDetail) }

// TestInternalError_hidesDetails: a 500 answer names a request id and
// none of the error's text; the log line of the request has that text
// under the same request id.
func TestInternalError_hidesDetails(t *testing.T) {
	t.Parallel()
	logger, logs := logtest.New(slog.LevelInfo)
	a := New(Config{}, failingStore{}, &auth.Verifier{AllowUnsigned: true}, nil, logger)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/v2_beta/config/drafts/all", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alice)
	resp, body := calltest.Do(t, srv.Client().Do, req)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500: %s", resp.StatusCode, body)
	}
	if bytes.Contains(body, []byte("state.db")) || bytes.Contains(body, []byte("input/output")) {
		t.Errorf("the answer holds the internal error: %s", body)
	}
	var e apierror.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	id := e.Params[apierror.ParamRequestID]
	if e.Code != httpguard.CodeInternal || id == "" || !strings.Contains(e.Message, id) || resp.Header.Get(httpguard.HeaderRequestID) != id {
		t.Fatalf("answer %v %s: want code %s, the request id in its %s param, message and %s header", resp.Header, body, httpguard.CodeInternal, apierror.ParamRequestID, httpguard.HeaderRequestID)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "request_id="+id) {
			line = l
		}
	}
	if !strings.Contains(line, internalDetail) || !strings.Contains(line, "level=ERROR") {
		t.Fatalf("no error line with request_id=%s and the error's text in the log:\n%s", id, logs.String())
	}
}
