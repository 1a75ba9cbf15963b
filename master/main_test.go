package master_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if goroutines outlive the tests: every server a
// test starts must be stopped with everything it started.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for the goroutines of the tests to end
// and returns the stacks of those that did not.
func leakedGoroutines(d time.Duration) string {
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var stray []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			// The test runner's own, and the signal loop of the fuzzer.
			if strings.Contains(g, "testing.(*M).") || strings.Contains(g, "leakedGoroutines") || strings.Contains(g, "os/signal.") {
				continue
			}
			stray = append(stray, g)
		}
		if len(stray) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(stray, "\n\n")
		}
		<-tick.C
	}
}
