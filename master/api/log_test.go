package api

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
)

// TestClientErrorsNotLoggedAtInfo: a flood of refused requests (bad
// tokens, unknown paths) adds no line per request to an info-level log,
// on the API's routes and on the master's own; they are at debug level,
// summed up once a minute (httpguard.TestClientErrors).
func TestClientErrorsNotLoggedAtInfo(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := mastertest.TestCluster(t, 1,
		mastertest.WithConfig(func(_ int, cfg *master.Config) { cfg.Logger = logger }),
		mastertest.WithSetup(func(_ int, s *master.Server) {
			if err := s.Mount(Prefix, New(Config{}, s.Store(), s.Verifier(), nil, logger).Handler(), master.OnLeader, master.RequestIDs(StateWrite)); err != nil {
				t.Fatal(err)
			}
		}))
	before := len(logs.String())
	for i := range 100 {
		for _, p := range []string{"/api/v2_beta/event/active/m", "/api/v2_beta/config/active/tree/info/m", "/squall/v1/tree/active", "/api/v2_beta/nowhere"} {
			r, _ := c.Do(0, "POST", p, "bad-token", []byte(`{"event": {}}`))
			if r.StatusCode < 400 || r.StatusCode >= 500 {
				t.Fatalf("request %d to %s: status %d, want a client error", i, p, r.StatusCode)
			}
		}
	}
	added := logs.String()[before:]
	if n := strings.Count(added, "request failed"); n > 0 {
		t.Fatalf("400 refused requests added %d info lines:\n%.2000s", n, added)
	}
	if r, _ := c.Get(0, "/healthz", ""); r.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", r.StatusCode)
	}
}
