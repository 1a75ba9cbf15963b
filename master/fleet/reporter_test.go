package fleet

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/master/auth"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n             int
		interval, max time.Duration
		want          time.Duration
	}{
		{1, 10 * time.Second, time.Minute, time.Second},
		{2, 10 * time.Second, time.Minute, 2 * time.Second},
		{6, 10 * time.Second, time.Minute, 32 * time.Second},
		{7, 10 * time.Second, time.Minute, time.Minute},
		{1000, 10 * time.Second, time.Minute, time.Minute},
		{1, 10 * time.Millisecond, time.Second, 10 * time.Millisecond},
		{3, 10 * time.Millisecond, time.Second, 40 * time.Millisecond},
	} {
		if got := Backoff(tc.n, tc.interval, tc.max); got != tc.want {
			t.Errorf("Backoff(%d, %s, %s) = %s, want %s", tc.n, tc.interval, tc.max, got, tc.want)
		}
	}
}

func TestNewReporter_invalid(t *testing.T) {
	t.Parallel()
	status := func() Report { return Report{} }
	for _, cfg := range []ReporterConfig{
		{Token: "t"},
		{MasterURLs: []string{"m1:8080"}, Token: "t"},
		{MasterURLs: []string{"http://m1:8080"}},
	} {
		if _, err := NewReporter(cfg, status); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := NewReporter(ReporterConfig{MasterURLs: []string{"http://m1:8080"}, Token: "t"}, nil); err == nil {
		t.Error("no status function accepted")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func member(t *testing.T, f *Fleet, key string) *Member {
	t.Helper()
	ms, err := f.List(t.Context(), time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Role+"/"+m.ID == key {
			return &m
		}
	}
	return nil
}

// TestReporter_Run: the reporter skips a master that does not answer and
// sticks to the one that took its heartbeat; the list follows its status.
func TestReporter_Run(t *testing.T) {
	t.Parallel()
	f, srv := newTestFleet(t, Default())
	// A master that takes connections but never answers.
	silent := httptest.NewUnstartedServer(nil)
	t.Cleanup(silent.Close)
	var mu sync.Mutex
	depth := int64(1)
	var log logtest.Buffer
	r, err := NewReporter(ReporterConfig{
		MasterURLs: []string{"http://" + silent.Listener.Addr().String(), srv.URL + "/"},
		Token:      token("fleet_report"),
		Interval:   10 * time.Millisecond,
		Timeout:    time.Second,
		Logger:     slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, func() Report {
		mu.Lock()
		defer mu.Unlock()
		d := depth
		return Report{ID: "s1", Role: RoleSatellite, Site: "par", Ready: true, SpoolDepth: &d}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	waitUntil(t, "the first heartbeat", func() bool { return member(t, f, "satellite/s1") != nil })
	mu.Lock()
	depth = 42
	mu.Unlock()
	waitUntil(t, "the new spool depth", func() bool {
		m := member(t, f, "satellite/s1")
		return m.SpoolDepth != nil && *m.SpoolDepth == 42
	})
	// The master records a heartbeat before the reporter logs it.
	waitUntil(t, "two deliveries in the log", func() bool { return strings.Count(log.String(), "fleet heartbeat delivered") >= 2 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestReporter_RunFailing: a refused token is explained once in the log
// (with the role it needs), and the reporter goes on; once a master takes
// the heartbeats again, the log says so.
func TestReporter_RunFailing(t *testing.T) {
	t.Parallel()
	f := New(Default(), &auth.Verifier{AllowUnsigned: true}, masters, nil)
	// Not serving yet: connections wait, requests time out.
	srv := httptest.NewUnstartedServer(f.Handler())
	t.Cleanup(srv.Close)
	var log logtest.Buffer
	r, err := NewReporter(ReporterConfig{
		MasterURLs: []string{"http://" + srv.Listener.Addr().String()},
		Token:      token("fleet_report"),
		Interval:   10 * time.Millisecond,
		Timeout:    300 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(&log, nil)),
	}, func() Report { return Report{ID: "e1", Role: RoleEngine, Ready: true} })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(t.Context()) }()
	waitUntil(t, "a warning", func() bool { return strings.Contains(log.String(), "fleet heartbeat failed on every master") })
	srv.Start()
	waitUntil(t, "the heartbeat after the failures", func() bool { return member(t, f, "engine/e1") != nil })
	waitUntil(t, "the recovery in the log", func() bool { return strings.Contains(log.String(), "fleet heartbeat delivered again") })

	// A token without fleet_report: refused, and the log says why.
	var log2 logtest.Buffer
	r2, err := NewReporter(ReporterConfig{
		MasterURLs: []string{srv.URL},
		Token:      token("view"),
		Interval:   10 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(&log2, nil)),
	}, func() Report { return Report{ID: "e2", Role: RoleEngine} })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r2.Run(t.Context()) }()
	waitUntil(t, "the refusal", func() bool { return strings.Contains(log2.String(), "403 MISSING_REQUIRED_PERMISSIONS") })
	if !strings.Contains(log2.String(), "fleet=root:fleet_report") {
		t.Errorf("the log does not say which role is needed:\n%s", log2.String())
	}
	if strings.Contains(log2.String(), token("view")) {
		t.Error("the token is in the log")
	}
	if member(t, f, "engine/e2") != nil {
		t.Error("a refused heartbeat is listed")
	}
}
