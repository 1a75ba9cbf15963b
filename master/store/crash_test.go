package store

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// crashDirEnv tells TestStore_CrashChild, run as a child process by
// TestStore_CrashRecovery, which data dir to write.
const crashDirEnv = "SQUALL_STORE_CRASH_DIR"

// TestStore_CrashChild is the process TestStore_CrashRecovery kills: a
// single-node cluster that inserts findings from 8 goroutines, snapshots
// and compacts its log often, and prints "ack <uid>" for every insert that
// returned success. It is skipped in a normal run.
func TestStore_CrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run as a child process by TestStore_CrashRecovery")
	}
	// Not testConfig: the process is killed, so nothing may need a
	// cleanup (t.TempDir would leave a directory behind).
	cfg := Config{
		NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true,
		Logger:           slog.New(slog.DiscardHandler),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 10 * time.Millisecond,
		SnapshotInterval: 20 * time.Millisecond, SnapshotThreshold: 32, TrailingLogs: 8,
	}
	s := openStore(t, cfg)
	waitReady(t, s)
	var (
		out  = bufio.NewWriter(os.Stdout)
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	// Bounded: the parent kills the process long before either bound.
	deadline := time.Now().Add(60 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				n := int(next.Add(1))
				if n > 200_000 {
					return
				}
				o, err := s.InsertFinding(t.Context(), testFinding("crash", n, time.Now().UnixMilli()))
				if err != nil || o.Err != nil || !o.Created {
					t.Errorf("insert %d: %+v %v", n, o, err)
					return
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %s\n", o.UID)
				err = out.Flush()
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStore_CrashRecovery kills a node (SIGKILL, no Close) while it
// inserts findings, then reopens its data dir with the state file as the
// kill left it, replaced by a stale copy, torn, or gone. The state file is
// written without fsync and trusted only after a clean close, so every
// reopening rebuilds it from the newest snapshot and the raft log (both
// synced) and has every acknowledged finding.
func TestStore_CrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "n1")
	fsmPath := filepath.Join(dir, fsmDBName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_CrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked []string
	)
	readDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if uid, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				mu.Lock()
				acked = append(acked, uid)
				mu.Unlock()
			}
		}
		readDone <- sc.Err()
	}()
	nAcked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	snapshotted := func() bool {
		ms, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
		return len(ms) > 0
	}
	// A stale copy of the state file, taken while the child writes it.
	waitFor(t, 30*time.Second, func() bool { return nAcked() >= 300 }, "300 acknowledged inserts")
	stale, err := os.ReadFile(fsmPath)
	if err != nil {
		t.Fatal(err)
	}
	// Kill after a snapshot and a compacted log, and more inserts.
	want := nAcked() + 1000
	waitFor(t, 30*time.Second, func() bool { return nAcked() >= want && snapshotted() }, "%d acknowledged inserts and a snapshot", want)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the child ended on its own before the kill; stderr:\n%s", stderr.String())
	}
	if _, err := os.Stat(fsmPath + cleanSuffix); err == nil {
		t.Fatal("a killed node left a clean marker")
	}
	t.Logf("%d inserts acknowledged before the kill", len(acked))

	for _, tc := range []struct {
		name string
		mod  func(t *testing.T, dir string)
	}{
		{"as the kill left it", func(*testing.T, string) {}},
		{"stale", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, fsmDBName), stale, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"torn", func(t *testing.T, dir string) {
			// Keep the meta pages, garble the rest: what a machine crash
			// can leave of a file written without fsync.
			p := filepath.Join(dir, fsmDBName)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := 2 * os.Getpagesize(); i < len(data); i++ {
				data[i] = byte(i * 7)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"gone", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, fsmDBName)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cdir := filepath.Join(t.TempDir(), "n1")
			if err := os.CopyFS(cdir, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			tc.mod(t, cdir)
			cfg := testConfig(t, "n1")
			cfg.DataDir = cdir
			cfg.Registerer = prometheus.NewRegistry()
			s := openStore(t, cfg)
			waitReady(t, s)
			for _, uid := range acked {
				if _, err := s.Finding("crash", uid); err != nil {
					t.Fatalf("acknowledged finding %s: %v", uid, err)
				}
			}
			p, err := s.Findings("crash", FindingQuery{})
			if err != nil || p.Total < len(acked) {
				t.Fatalf("%d findings, %d acknowledged, %v", p.Total, len(acked), err)
			}
			// A clean close marks the state file clean, and the next
			// open keeps it: the state is there before raft replays.
			addr := s.Addr()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(cdir, fsmDBName+cleanSuffix)); err != nil {
				t.Fatalf("no clean marker after Close: %v", err)
			}
			cfg.BindAddr, cfg.Registerer = addr, prometheus.NewRegistry()
			s = openStore(t, cfg)
			if _, err := s.Finding("crash", acked[len(acked)-1]); err != nil {
				t.Fatalf("after a clean restart, before raft replays: %v", err)
			}
			if _, err := os.Stat(filepath.Join(cdir, fsmDBName+cleanSuffix)); !os.IsNotExist(err) {
				t.Fatalf("the clean marker outlives Open: %v", err)
			}
		})
	}
}
