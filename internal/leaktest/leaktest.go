// Package leaktest checks that a test binary leaves no goroutines behind:
// servers, brokers, Kafka clients, raft nodes, file watchers and HTTP
// connections must all be stopped by the tests that started them.
package leaktest

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// suspects are the stack frames that mark a goroutine the tests started.
var suspects = []string{
	"github.com/squallhq/squall/",
	"github.com/segmentio/kafka-go",
	"github.com/twmb/franz-go",
	"github.com/fsnotify/fsnotify",
	"net/http.",
	"net.(*netFD)",
	"internal/poll.runtime_pollWait",
}

// Main runs the tests and then fails the binary if goroutines of the tests
// (those with a frame of this module, a Kafka client, the file watcher or
// the network) are still running after five seconds. It checks nothing
// under -short.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 && !testing.Short() {
		code = report(wait(5*time.Second, isSuspect))
	}
	os.Exit(code)
}

// MainAll runs the tests and then fails the binary if any goroutine but
// the test runner's and the signal loop is still running after ten
// seconds, after closing the idle connections of http.DefaultClient.
func MainAll(m *testing.M) {
	code := m.Run()
	if code == 0 {
		http.DefaultClient.CloseIdleConnections()
		code = report(wait(10*time.Second, func(string) bool { return true }))
	}
	os.Exit(code)
}

func report(leaked string) int {
	if leaked == "" {
		return 0
	}
	fmt.Fprintf(os.Stderr, "leaktest: goroutines left behind by the tests:\n\n%s\n", leaked)
	return 1
}

func isSuspect(g string) bool {
	for _, s := range suspects {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

// wait returns the stacks of the goroutines matching leaked still running
// after d.
func wait(d time.Duration, leaked func(stack string) bool) string {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		stray := strays(leaked)
		if stray == "" || time.Now().After(deadline) {
			return stray
		}
		<-tick.C // nothing to wait on: goroutines end on their own
	}
}

func strays(leaked func(stack string) bool) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// This check's own, the test runner's, and the fuzzer's signal loop.
		if strings.Contains(g, "leaktest.strays") || strings.Contains(g, "testing.(*M).") || strings.Contains(g, "os/signal.") {
			continue
		}
		if leaked(g) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
