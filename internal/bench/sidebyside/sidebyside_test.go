package sidebyside

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"
)

// TestSideBySide runs internal/bench/sidebyside/run.sh with a tiny
// configuration (one round of 1 s per intake target, 500 events for the
// engine and the bare consumer), so that the harness keeps working: it
// builds the programs, every target answers 200 (each round with the CPU
// per request of the target, the broker and the load generator, and the
// share of the machine they took), both consumers drain the preloaded
// topic, and the ratios are printed.
func TestSideBySide(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("run.sh reads CPU times from /proc")
	}
	needCurl(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "internal/bench/sidebyside/run.sh")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "ROUNDS=1", "DURATION=1s", "CONNECTIONS=4", "EVENTS=500", "ENGINE_ROUNDS=1", "OUT="+out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, b)
	}
	text := string(b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^1 +satellite +[1-9]\d* +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[1-9][\d.]* +[1-9]\d*%$`),
		regexp.MustCompile(`(?m)^1 +plain +[1-9]\d* +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[1-9][\d.]* +[1-9]\d*%$`),
		regexp.MustCompile(`(?m)^1 +naive +[1-9]\d* +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[1-9][\d.]* +[1-9]\d*%$`),
		regexp.MustCompile(`satellite/plain req/s [\d.]+, p99 [\d.]+; satellite/naive req/s [\d.]+, p99 [\d.]+`),
		regexp.MustCompile(`(?m)^preloaded 500 events`),
		regexp.MustCompile(`(?m)^1 +engine +[1-9]\d* `),
		regexp.MustCompile(`(?m)^1 +bareconsumer +[1-9]\d* `),
		regexp.MustCompile(`engine/bare consumer events/s [\d.]+\n`),
	} {
		if !want.MatchString(text) {
			t.Errorf("no %s in the output:\n%s", want, text)
		}
	}
	// The engine ran the tree's archive action on every event.
	lines, err := os.ReadFile(filepath.Join(out, "archive", "bench.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile(`\n`).FindAll(lines, -1)); n != 500 {
		t.Errorf("%d archived events, want 500", n)
	}
}

// TestSideBySide_Findings runs run.sh's findings part with a tiny
// configuration (one round of 1 s, 4 connections): three masters form a
// cluster, every insert is answered 201, each round's CPU per insert (the
// three masters', the leader's and the load generator's) and share of the
// machine are printed with the medians, and the cluster's data
// directories are deleted.
func TestSideBySide_Findings(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("run.sh reads CPU times from /proc")
	}
	needCurl(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "internal/bench/sidebyside/run.sh")
	cmd.Dir = "../../.."
	out := t.TempDir()
	cmd.Env = append(os.Environ(), "PARTS=findings", "ROUNDS=1", "DURATION=1s", "CONNECTIONS=4", "OUT="+out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, b)
	}
	// The masters' data is deleted once the figures are printed (it grows
	// by about 1 GB per cluster in a full run); their logs stay.
	if _, err := os.Stat(filepath.Join(out, "findings-squall")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the cluster's data directory is still there after the run (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(out, "findings-squall-m1.log")); err != nil {
		t.Errorf("the leader's log: %v", err)
	}
	text := string(b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^1 +squall +[1-9]\d* +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[1-9][\d.]* +[1-9]\d*%$`),
		regexp.MustCompile(`findings medians, squall: inserts/s [\d.]+, p99 [\d.]+ ms, CPU per insert [\d.]+ us, the leader's [\d.]+ us`),
		regexp.MustCompile(`findings stages, squall \(means\): batch [\d.]+ findings, batch wait [\d.]+ ms ` +
			`\(answer -> next submitted [\d.]+ ms; closed: (alone|full|clocked|window|grace) \d+(, (alone|full|clocked|window|grace) \d+)*\), submitted -> applied [\d.]+ ms, ` +
			`log append [\d.]+ ms \(follower [\d.]+ ms\), state-file apply [\d.]+ ms \(follower [\d.]+ ms\)`),
	} {
		if !want.MatchString(text) {
			t.Errorf("no %s in the output:\n%s", want, text)
		}
	}
}

// needCurl skips a test of run.sh where curl is missing, and fails it in
// CI, whose .ci/run installs curl.
func needCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("run.sh needs curl (.ci/run installs it)")
		}
		t.Skip("run.sh needs curl")
	}
}
