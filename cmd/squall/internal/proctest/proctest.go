// Package proctest runs the processes of the end-to-end tests of squall:
// it starts one, waits for the log line that says it is up, keeps what it
// writes for the failure messages, and stops or kills it. The processes
// give no signal to wait on but their logs and their answers: Wait polls,
// bounded.
package proctest

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

// Proc is a process of a test.
type Proc struct {
	Name string
	// Addr is the address its start line names; Base is http://Addr.
	Addr, Base string
	Cmd        *exec.Cmd
	// Logs holds what it wrote on its standard output and error.
	Logs *logtest.Buffer
	done chan struct{} // closed once it exited and its output was read
}

// Start starts cmd, whose standard error (or standard output) carries
// JSON log lines, waits up to 30 s for the line whose msg is msg and takes
// that line's field key as its address. The process is killed when the
// test ends unless it was stopped; the whole log of a failed test is kept
// (go test -artifacts).
func Start(t testing.TB, name string, cmd *exec.Cmd, msg, key string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Logs: &logtest.Buffer{}}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
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
		logtest.Follow(r, p.Logs, msg, key, addr)
	}()
	p.done = make(chan struct{})
	go func() {
		<-exited
		<-read
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			_ = os.WriteFile(filepath.Join(t.ArtifactDir(), name+".log"), []byte(p.Logs.String()), 0o600)
		}
	})
	select {
	case p.Addr = <-addr:
	case <-p.done:
		t.Fatalf("%s exited:\n%s", name, p.Logs.Tail(40))
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no %q log line within 30s:\n%s", name, msg, p.Logs.Tail(40))
	}
	p.Base = "http://" + p.Addr
	return p
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Proc) Kill() {
	if p.Running() {
		_ = p.Cmd.Process.Kill()
	}
	<-p.done
}

// Stop ends the process with SIGTERM and reports an unclean exit, or none
// within 40 s (it is killed then).
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if !p.Running() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Errorf("%s did not exit within 40s of SIGTERM", p.Name)
		p.Kill()
	}
	if st := p.Cmd.ProcessState; st != nil && !st.Success() {
		t.Errorf("%s: exit after SIGTERM: %v\n%s", p.Name, st, p.Logs.Tail(30))
	}
}

// Wait polls cond until it holds, or fails the test after d with the end
// of the logs of procs.
func Wait(t testing.TB, d time.Duration, what string, procs []*Proc, cond func() bool) {
	t.Helper()
	if !polltest.Until(t.Context(), d, cond) {
		t.Fatalf("%s: not within %s\n%s", what, d, Tails(procs))
	}
}

// Tails returns the end of the logs of procs, each under its name.
func Tails(procs []*Proc) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s:\n%s\n", p.Name, p.Logs.Tail(25))
	}
	return b.String()
}
