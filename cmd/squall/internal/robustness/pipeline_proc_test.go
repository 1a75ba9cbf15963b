package robustness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/polltest"
)

// The helpers of TestPipeline: its processes (squall, built by TestMain,
// and this test binary as the broker), and polling with deadlines (the
// processes give no signal to wait on).

// pipeProc is a process of a pipeline test: squall, or this test binary as
// the broker.
type pipeProc struct {
	name string
	addr string // what its start line names
	base string // http://addr
	cmd  *exec.Cmd
	logs *logtest.Buffer
	done chan struct{} // closed when its output ends
}

// startPipeProc starts cmd, whose standard error (or standard output)
// carries JSON log lines, waits up to 30 s for the line whose msg is msg
// and takes that line's field key as its address. The process is killed
// when the test ends unless it was stopped.
func startPipeProc(t *testing.T, name string, cmd *exec.Cmd, msg, key string) *pipeProc {
	t.Helper()
	p := &pipeProc{name: name, cmd: cmd, logs: &logtest.Buffer{}}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = procAttr() // no orphan outlives a killed test binary
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = w.Close()
		close(exited)
	}()
	addr := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		logtest.Follow(r, p.logs, msg, key, addr)
	}()
	p.done = exitedAndRead(exited, read)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			_ = os.WriteFile(filepath.Join(t.ArtifactDir(), name+".log"), []byte(p.logs.Tail(1<<30)), 0o600)
		}
	})
	select {
	case p.addr = <-addr:
	case <-p.done:
		t.Fatalf("%s exited:\n%s", name, p.logs.Tail(40))
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no %q log line within 30s:\n%s", name, msg, p.logs.Tail(40))
	}
	p.base = "http://" + p.addr
	return p
}

// exitedAndRead returns a channel closed once both are.
func exitedAndRead(a, b <-chan struct{}) chan struct{} {
	c := make(chan struct{})
	go func() {
		<-a
		<-b
		close(c)
	}()
	return c
}

// running reports whether the process has not exited.
func (p *pipeProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *pipeProc) kill() {
	if p.running() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// stop ends the process with SIGTERM and reports an unclean exit.
func (p *pipeProc) stop(t *testing.T) {
	t.Helper()
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Errorf("%s did not exit within 40s of SIGTERM", p.name)
		p.kill()
	}
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		t.Errorf("%s: exit after SIGTERM: %v\n%s", p.name, st, p.logs.Tail(30))
	}
}

// pipeMust waits for cond or fails the test with the logs of procs.
func pipeMust(t *testing.T, d time.Duration, what string, procs []*pipeProc, cond func() bool) {
	t.Helper()
	if !polltest.Until(t.Context(), d, cond) {
		var b strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, p.logs.Tail(25))
		}
		t.Fatalf("%s: not within %s\n%s", what, d, b.String())
	}
}

// pipeRun runs the binary and returns its standard output.
func pipeRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return string(out)
}

// writePipeFile writes a file of the test.
func writePipeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
