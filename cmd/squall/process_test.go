package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// started is a process started by startLogged.
type started struct {
	// addr is the value of the awaited log line's address field.
	addr string
	// logs holds everything the process wrote on standard error.
	logs *lockedBuffer
	// done is closed when the process closed its standard error (it exited).
	done <-chan struct{}
}

// startLogged starts cmd, whose standard error carries JSON log lines, and
// waits up to 30 s for the line whose msg is msg; it returns that line's
// field key (the address the process listens on). The process is killed
// when the test ends, unless the test waited for it.
func startLogged(t *testing.T, cmd *exec.Cmd, msg, key string) *started {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &started{logs: &lockedBuffer{}}
	addr := make(chan string, 1)
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.logs.Write(append(sc.Bytes(), '\n'))
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
				a, _ := rec[key].(string)
				select {
				case addr <- a:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
			_ = cmd.Wait()
		}
	})
	select {
	case s.addr = <-addr:
	case <-done:
		t.Fatalf("%s exited:\n%s", cmd.Args[1], s.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no %q log line within 30s:\n%s", msg, s.logs.String())
	}
	return s
}
