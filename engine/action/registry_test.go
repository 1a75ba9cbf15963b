package action

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/metrictest"
)

var errFlaky = errors.New("flaky")

func TestRegistry_Run_retries(t *testing.T) {
	t.Parallel()
	retriable := func(int) error { return NewRetriable(errFlaky) }
	tests := []struct {
		name string
		// retry overrides the registry's policy (jitter 0: exact delays).
		maxAttempts int
		base, limit time.Duration
		// fail returns the error of the n-th call.
		fail         func(n int) error
		wantCalls    int
		wantErr      error // nil: success
		wantRetried  bool  // Retriable(err)
		wantElapsed  time.Duration
		wantExecuted float64
		wantFailed   map[string]float64
	}{
		{
			name:        "success at once",
			maxAttempts: 5, base: 100 * time.Millisecond, limit: 10 * time.Second,
			fail:         func(int) error { return nil },
			wantCalls:    1,
			wantExecuted: 1,
		},
		{
			name:        "retriable then success",
			maxAttempts: 5, base: 100 * time.Millisecond, limit: 10 * time.Second,
			fail: func(n int) error {
				if n < 4 {
					return NewRetriable(errFlaky)
				}
				return nil
			},
			wantCalls:    4,
			wantElapsed:  100*time.Millisecond + 200*time.Millisecond + 400*time.Millisecond,
			wantExecuted: 1,
		},
		{
			name:        "delays capped at max_delay",
			maxAttempts: 5, base: 100 * time.Millisecond, limit: 250 * time.Millisecond,
			fail:        retriable,
			wantCalls:   5,
			wantErr:     errFlaky,
			wantRetried: true,
			wantElapsed: 100*time.Millisecond + 200*time.Millisecond + 250*time.Millisecond + 250*time.Millisecond,
			wantFailed:  map[string]float64{reasonExhausted: 1},
		},
		{
			name:        "one attempt disables retries",
			maxAttempts: 1, base: 100 * time.Millisecond, limit: time.Second,
			fail:        retriable,
			wantCalls:   1,
			wantErr:     errFlaky,
			wantRetried: true,
			wantFailed:  map[string]float64{reasonExhausted: 1},
		},
		{
			name:        "permanent is not retried",
			maxAttempts: 5, base: 100 * time.Millisecond, limit: time.Second,
			fail:       func(int) error { return NewPermanent(errFlaky) },
			wantCalls:  1,
			wantErr:    errFlaky,
			wantFailed: map[string]float64{reasonPermanent: 1},
		},
		{
			name:        "unclassified is permanent",
			maxAttempts: 5, base: 100 * time.Millisecond, limit: time.Second,
			fail:       func(int) error { return errFlaky },
			wantCalls:  1,
			wantErr:    errFlaky,
			wantFailed: map[string]float64{reasonPermanent: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := Default()
				cfg.Retry = RetryConfig{MaxAttempts: tt.maxAttempts, BaseDelay: Duration(tt.base), MaxDelay: Duration(tt.limit)}
				rec := &recorder{err: tt.fail}
				r, reg := newTestRegistry(t, cfg, Deps{Executors: map[string]Executor{"x": rec}})

				start := time.Now()
				err := r.Run(t.Context(), tree.Action{ID: "x"})
				elapsed := time.Since(start)

				if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) {
					t.Fatalf("Run: %v, want %v", err, tt.wantErr)
				}
				if Retriable(err) != tt.wantRetried {
					t.Errorf("Retriable(%v) = %v", err, !tt.wantRetried)
				}
				if got := len(rec.calls()); got != tt.wantCalls {
					t.Errorf("%d calls, want %d", got, tt.wantCalls)
				}
				if elapsed != tt.wantElapsed {
					t.Errorf("took %v, want %v", elapsed, tt.wantElapsed)
				}
				if got := testutil.ToFloat64(r.metrics.executed.WithLabelValues("x")); got != tt.wantExecuted {
					t.Errorf("executed = %v, want %v", got, tt.wantExecuted)
				}
				if got, want := testutil.ToFloat64(r.metrics.retried.WithLabelValues("x")), float64(tt.wantCalls-1); got != want {
					t.Errorf("retried = %v, want %v", got, want)
				}
				for _, reason := range []string{reasonPermanent, reasonExhausted, reasonCanceled} {
					if got := testutil.ToFloat64(r.metrics.failed.WithLabelValues("x", reason)); got != tt.wantFailed[reason] {
						t.Errorf("failed{%s} = %v, want %v", reason, got, tt.wantFailed[reason])
					}
				}
				if got := metrictest.Sum(t, reg, "squall_action_duration_seconds", map[string]string{"action": "x"}); got != float64(tt.wantCalls) {
					t.Errorf("duration observations = %v, want %d", got, tt.wantCalls)
				}
			})
		})
	}
}

func TestRegistry_Run_jitter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := Default()
		cfg.Retry = RetryConfig{MaxAttempts: 4, BaseDelay: Duration(time.Second), MaxDelay: Duration(time.Minute), Jitter: 0.5}
		r, _ := newTestRegistry(t, cfg, Deps{Executors: map[string]Executor{
			"x": &recorder{err: func(int) error { return NewRetriable(errFlaky) }},
		}})
		// Delays of 1s, 2s and 4s, each shortened by up to a half.
		for range 20 {
			start := time.Now()
			_ = r.Run(t.Context(), tree.Action{ID: "x"})
			elapsed := time.Since(start)
			if elapsed < 3500*time.Millisecond || elapsed > 7*time.Second {
				t.Fatalf("took %v, want between 3.5s and 7s", elapsed)
			}
		}
	})
}

func TestRegistry_Run_canceledWhileWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := Default()
		cfg.Retry = RetryConfig{MaxAttempts: 5, BaseDelay: Duration(time.Minute), MaxDelay: Duration(time.Hour)}
		rec := &recorder{err: func(int) error { return NewRetriable(errFlaky) }}
		r, _ := newTestRegistry(t, cfg, Deps{Executors: map[string]Executor{"x": rec}})

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Second, cancel)
		start := time.Now()
		err := r.Run(ctx, tree.Action{ID: "x"})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
			t.Fatalf("Run: %v, want context.Canceled and the last error", err)
		}
		if elapsed := time.Since(start); elapsed != 10*time.Second {
			t.Errorf("returned after %v, want 10s", elapsed)
		}
		if n := len(rec.calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
		if got := testutil.ToFloat64(r.metrics.failed.WithLabelValues("x", reasonCanceled)); got != 1 {
			t.Errorf("failed{canceled} = %v, want 1", got)
		}
	})
}

func TestRegistry_Run_unknownID(t *testing.T) {
	t.Parallel()
	r, reg := newTestRegistry(t, testConfig(), Deps{})
	err := r.Run(t.Context(), tree.Action{ID: "nope"})
	if !errors.Is(err, ErrNoExecutor) || Retriable(err) {
		t.Fatalf("Run: %v, want permanent ErrNoExecutor", err)
	}
	if !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error %q does not name the id", err)
	}
	if got := testutil.ToFloat64(r.metrics.unknown); got != 1 {
		t.Errorf("unknown = %v, want 1", got)
	}
	// The unknown id did not become a label.
	if n := testutil.CollectAndCount(r.metrics.executed); n != len(r.IDs()) {
		t.Errorf("%d executed series, want %d (one per registered id)", n, len(r.IDs()))
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP squall_action_unknown_total Actions dropped because no executor handles their id.
# TYPE squall_action_unknown_total counter
squall_action_unknown_total 1
`), "squall_action_unknown_total"); err != nil {
		t.Error(err)
	}
}

func TestNewRegistry_executors(t *testing.T) {
	t.Parallel()
	withDirs := testConfig()
	withDirs.Archive.BasePath = t.TempDir()
	withDirs.Archive.DefaultPath = "all.log"
	withDirs.Script.AllowedDir = t.TempDir()
	custom := &recorder{}

	tests := []struct {
		name string
		cfg  Config
		deps Deps
		want []string
	}{
		{"defaults: logger and foreach only", Default(), Deps{}, []string{"foreach", "logger"}},
		{"http with allowed hosts", testConfig(), Deps{}, []string{"foreach", "http", "logger"}},
		{"archive and script configured", withDirs, Deps{}, []string{"archive", "foreach", "http", "logger", "script"}},
		{"extra executor", testConfig(), Deps{Executors: map[string]Executor{"kafka": custom}}, []string{"foreach", "http", "kafka", "logger"}},
		{"nil removes a built-in", testConfig(), Deps{Executors: map[string]Executor{"http": nil}}, []string{"foreach", "logger"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newTestRegistry(t, tt.cfg, tt.deps)
			if got := r.IDs(); !slices.Equal(got, tt.want) {
				t.Fatalf("IDs = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("replace a built-in", func(t *testing.T) {
		t.Parallel()
		r, _ := newTestRegistry(t, testConfig(), Deps{Executors: map[string]Executor{"logger": custom}})
		if err := r.Run(t.Context(), tree.Action{ID: "logger"}); err != nil {
			t.Fatal(err)
		}
		if len(custom.calls()) != 1 {
			t.Fatal("the replacement did not run")
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.Retry.MaxAttempts = 0
		var ce *ConfigError
		if _, err := NewRegistry(cfg, Deps{}); !errors.As(err, &ce) || ce.Field != "retry.max_attempts" {
			t.Fatalf("NewRegistry: %v, want a ConfigError on retry.max_attempts", err)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		t.Parallel()
		if _, err := NewRegistry(testConfig(), Deps{Executors: map[string]Executor{"": custom}}); err == nil {
			t.Fatal("NewRegistry accepted an empty executor id")
		}
	})
}

func TestRegistry_Close(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	r, err := NewRegistry(testConfig(), Deps{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRegistry(testConfig(), Deps{Registerer: reg}); err == nil {
		t.Fatal("a second registry registered the same metrics")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := r.Run(t.Context(), tree.Action{ID: "logger"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	// After Close, a new registry (a configuration reload) can register.
	r2, err := NewRegistry(testConfig(), Deps{Registerer: reg})
	if err != nil {
		t.Fatalf("NewRegistry after Close: %v", err)
	}
	_ = r2.Close()
}

func TestRetriable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errFlaky, false},
		{"retriable", NewRetriable(errFlaky), true},
		{"wrapped retriable", fmt.Errorf("ctx: %w", NewRetriable(errFlaky)), true},
		{"permanent", NewPermanent(errFlaky), false},
		{"permanent over retriable", NewPermanent(NewRetriable(errFlaky)), false},
		{"no executor", NewPermanent(ErrNoExecutor), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Retriable(tt.err); got != tt.want {
				t.Errorf("Retriable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if NewRetriable(nil) != nil || NewPermanent(nil) != nil {
		t.Error("marking a nil error must return nil")
	}
}

func TestLogger_Execute(t *testing.T) {
	t.Parallel()
	log, out := newTestLogger()
	r, _ := newTestRegistry(t, testConfig(), Deps{Logger: log})
	if err := r.Run(t.Context(), tree.Action{ID: "logger", Payload: payload(t, `{"msg": "hi", "n": 3}`)}); err != nil {
		t.Fatal(err)
	}
	want := `"level":"INFO","msg":"action","component":"action","action":"logger","payload":{"msg":"hi","n":3}`
	if !strings.Contains(out.String(), want) {
		t.Errorf("log %s\ndoes not contain %s", out, want)
	}
}

// TestRegistry_disabledExecutors: with the default settings (no actions
// file) http and the other configurable executors are not enabled, an
// action naming one fails permanently without reaching anything, and the
// error says how to enable it; foreach cannot reach them either.
func TestRegistry_disabledExecutors(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	r, reg := newTestRegistry(t, Default(), Deps{})
	want := map[string]string{
		IDHTTP:          `set http.allowed_hosts (or "allow_any_host": true)`,
		IDArchive:       "set archive.base_path",
		IDScript:        "set script.allowed_dir",
		IDKafka:         "kafka.default_topic",
		IDFinding:       "set finding.master_urls",
		IDElasticsearch: "elasticsearch.default_endpoint",
	}
	for id, hint := range want {
		err := r.Run(t.Context(), tree.Action{ID: id, Payload: map[string]any{"url": rc.URL}})
		if !errors.Is(err, ErrNotEnabled) || !errors.Is(err, ErrNoExecutor) || Retriable(err) ||
			!strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), "--actions-config") {
			t.Errorf("%s: %v, want a permanent ErrNotEnabled saying %q", id, err, hint)
		}
	}
	err := r.Run(t.Context(), tree.Action{ID: IDForeach, Payload: map[string]any{
		"target":  []any{"a"},
		"actions": []any{map[string]any{"id": IDHTTP, "payload": map[string]any{"url": rc.URL + "/${item}"}}},
	}})
	if !errors.Is(err, ErrNotEnabled) || !strings.Contains(err.Error(), "http.allowed_hosts") {
		t.Errorf("foreach of http: %v, want ErrNotEnabled", err)
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d requests from a registry without http", n)
	}
	if got := metrictest.Sum(t, reg, "squall_action_unknown_total", nil); got != float64(len(want)+1) {
		t.Errorf("squall_action_unknown_total = %v, want %d", got, len(want)+1)
	}
	// An id that is no executor at all keeps the plain error.
	if err := r.Run(t.Context(), tree.Action{ID: "pager"}); !errors.Is(err, ErrNoExecutor) || errors.Is(err, ErrNotEnabled) {
		t.Errorf("unknown id: %v", err)
	}

	// kafka configured where there is no producer (a master).
	cfg := Default()
	cfg.Kafka.DefaultTopic = "out"
	r, _ = newTestRegistry(t, cfg, Deps{})
	if err := r.Run(t.Context(), tree.Action{ID: IDKafka}); !errors.Is(err, ErrNotEnabled) || !strings.Contains(err.Error(), "no Kafka writer") {
		t.Errorf("kafka without a producer: %v", err)
	}
}

// TestRegistry_allowAnyHost: allow_any_host enables http for every host,
// with a warning in the log.
func TestRegistry_allowAnyHost(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	log, logs := newTestLogger()
	cfg := Default()
	cfg.HTTP.AllowAnyHost = true
	r, _ := newTestRegistry(t, cfg, Deps{Logger: log})
	if err := r.Run(t.Context(), tree.Action{ID: IDHTTP, Payload: map[string]any{"url": rc.URL}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"http.allow_any_host is set`) {
		t.Errorf("no warning about allow_any_host:\n%s", logs)
	}
}
