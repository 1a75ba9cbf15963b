package proctest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// shell returns a command that runs script with sh: the processes of
// these tests, which log as squall's do (a JSON line per event).
func shell(script string) *exec.Cmd {
	return exec.Command("sh", "-c", script)
}

// TestStart_End: the start line gives the address; End returns how the
// process exited on the signal (its trap's status here), after the last
// lines it wrote.
func TestStart_End(t *testing.T) {
	t.Parallel()
	p := Start(t, "trap", shell(`trap 'echo "{\"msg\":\"stopped\"}"; exit 3' TERM
echo '{"msg":"up","addr":"127.0.0.1:1"}'
while :; do sleep 0.05; done`), "up", "addr")
	if p.Addr != "127.0.0.1:1" || p.Base != "http://127.0.0.1:1" {
		t.Fatalf("address %q, base %q", p.Addr, p.Base)
	}
	err := p.End(t, syscall.SIGTERM)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("End: %v, want exit status 3", err)
	}
	if p.Running() || !strings.Contains(p.Logs.String(), `{"msg":"stopped"}`) {
		t.Errorf("running %v, logs:\n%s", p.Running(), p.Logs)
	}
	// Once it has exited, End answers the same.
	if again := p.End(t, syscall.SIGTERM); !errors.As(again, &ee) || ee.ExitCode() != 3 {
		t.Errorf("End again: %v", again)
	}
}

// TestProc_Stop: a process that exits 0 on SIGTERM stops cleanly, its
// own standard output (a file) is left to it and only its standard error
// is in the logs.
func TestProc_Stop(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "stdout")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := shell(`trap 'exit 0' TERM
echo to-stdout
echo '{"msg":"up","addr":"a"}' >&2
while :; do sleep 0.05; done`)
	cmd.Stdout = f
	p := Start(t, "clean", cmd, "up", "addr")
	p.Stop(t)
	if p.Running() {
		t.Fatal("still running after Stop")
	}
	if b, _ := os.ReadFile(out); string(b) != "to-stdout\n" {
		t.Errorf("standard output %q", b)
	}
	if strings.Contains(p.Logs.String(), "to-stdout") {
		t.Errorf("the logs hold the standard output:\n%s", p.Logs)
	}
}

// TestProc_WaitReady: WaitReady returns once /readyz answers 200.
func TestProc_WaitReady(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := calls.Add(1); r.URL.Path != "/readyz" || n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	p := Start(t, "ready", shell(`echo '{"msg":"up","addr":"`+addr+`"}'; while :; do sleep 0.05; done`), "up", "addr")
	p.WaitReady(t)
	if n := calls.Load(); n != 3 {
		t.Errorf("ready after %d calls, want 3", n)
	}
	p.Kill()
	if p.Running() {
		t.Error("running after Kill")
	}
}
