// Package leaktest checks that a test binary leaves no goroutines behind:
// servers, brokers, Kafka clients, file watchers and HTTP connections must
// all be stopped by the tests that started them.
package leaktest

import (
	"fmt"
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
// are still running, after giving them up to five seconds to end.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 && !testing.Short() {
		if leaked := wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines left behind by the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// wait returns the stacks of the suspect goroutines still running after d.
func wait(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		leaked := suspectStacks()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond) // nothing to wait on: goroutines end on their own
	}
}

func suspectStacks() string {
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
		if strings.Contains(g, "leaktest.suspectStacks") || strings.Contains(g, "testing.(*M).") {
			continue
		}
		for _, s := range suspects {
			if strings.Contains(g, s) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}
