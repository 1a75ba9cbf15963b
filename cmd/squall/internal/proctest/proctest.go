// Package proctest runs the processes of the end-to-end tests of squall:
// it starts one, waits for the log line that says it is up, keeps what it
// writes for the failure messages, waits until it is ready, signals it
// and stops or kills it. The processes give no signal to wait on but
// their logs and their answers: Wait and WaitReady poll, bounded.
package proctest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/polltest"
)

// Proc is a process of a test.
type Proc struct {
	Name string
	// Addr is the address its start line names; Base is http://Addr.
	Addr, Base string
	Cmd        *exec.Cmd
	// Logs holds what it wrote on its standard error, and on its standard
	// output unless the command had one set.
	Logs *logtest.Buffer
	done chan struct{} // closed once it exited and its output was read
	err  error         // how it exited (cmd.Wait's answer), once done is closed
}

// Bounds of the waits for a process (the machine may be busy): to answer
// ready once it logged its start, and to exit once signalled.
const (
	readyTimeout = time.Minute
	exitTimeout  = time.Minute
)

// Start starts cmd, whose standard error (or standard output) carries
// JSON log lines, waits up to 30 s for the line whose msg is msg and takes
// that line's field key as its address. A standard output the command
// already has (a file the test reads) is left to it. The process is
// killed when the test ends unless it was stopped; the whole log of a
// failed test is kept (go test -artifacts).
func Start(t testing.TB, name string, cmd *exec.Cmd, msg, key string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Logs: &logtest.Buffer{}}
	r, w := io.Pipe()
	if cmd.Stdout == nil {
		cmd.Stdout = w
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		p.err = cmd.Wait()
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

// Signal sends sig to the process (SIGHUP to reload, SIGSTOP to freeze).
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: send %v: %v", p.Name, sig, err)
	}
}

// End sends sig to the process and waits up to a minute for it to exit
// and for the end of its output (a clean stop's lines come last); it
// returns how it exited: nil for status 0, else an *exec.ExitError. A
// process that does not exit in time is killed and fails the test.
func (p *Proc) End(t testing.TB, sig os.Signal) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("%s: send %v: %v", p.Name, sig, err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(exitTimeout):
		p.Kill()
		t.Fatalf("%s did not exit within %s of %v:\n%s", p.Name, exitTimeout, sig, p.Logs.Tail(40))
		return nil
	}
}

// Stop ends the process with SIGTERM and reports an unclean exit.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if !p.Running() {
		return
	}
	if err := p.End(t, syscall.SIGTERM); err != nil {
		t.Errorf("%s: exit after SIGTERM: %v\n%s", p.Name, err, p.Logs.Tail(30))
	}
}

// WaitReady polls the process's /readyz until it answers 200, for at most
// a minute.
func (p *Proc) WaitReady(t testing.TB) {
	t.Helper()
	Wait(t, readyTimeout, p.Name+" ready", []*Proc{p}, func() bool {
		resp, err := calltest.Client().Get(p.Base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
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
