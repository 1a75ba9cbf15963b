package action

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/logtest"
)

// testConfig returns a valid configuration with fast retries and nothing
// enabled that needs a directory.
func testConfig() Config {
	cfg := Default()
	cfg.Retry.BaseDelay = Duration(time.Millisecond)
	cfg.Retry.MaxDelay = Duration(4 * time.Millisecond)
	cfg.Retry.Jitter = 0
	// The test receivers listen on loopback.
	cfg.HTTP.AllowedHosts = []string{"127.0.0.1"}
	return cfg
}

// newTestRegistry builds a registry on its own Prometheus registry and
// closes it when the test ends.
func newTestRegistry(t testing.TB, cfg Config, deps Deps) (*Registry, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if deps.Registerer == nil {
		deps.Registerer = reg
	}
	r, err := NewRegistry(cfg, deps)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r, reg
}

// newTestLogger returns a JSON logger at debug level and what it wrote.
func newTestLogger() (*slog.Logger, *logtest.Buffer) {
	b := &logtest.Buffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// decodeJSON decodes JSON text as the engine does (numbers as json.Number).
func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// payload decodes a JSON object.
func payload(t testing.TB, s string) map[string]any {
	t.Helper()
	m, ok := decodeJSON(t, s).(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", s)
	}
	return m
}

// recorder is an executor that records the actions it receives.
type recorder struct {
	mu      sync.Mutex
	actions []tree.Action
	err     func(n int) error // the error of the n-th call (1-based); nil for none
}

func (r *recorder) Execute(_ context.Context, a tree.Action) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.actions = append(r.actions, a)
	if r.err != nil {
		return r.err(len(r.actions))
	}
	return nil
}

func (r *recorder) calls() []tree.Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tree.Action(nil), r.actions...)
}

// writeScript writes an executable shell script into dir.
func writeScript(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testAction returns an action of id with the payload.
func testAction(id string, p map[string]any) tree.Action {
	return tree.Action{ID: id, Payload: p, CreatedMs: 1}
}
