package robustness

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Flags of the suite. Defaults suit `go test ./...`; CI and long runs set
// them (docs/RELIABILITY.md).
var (
	flagDuration = flag.Duration("robustness.duration", 15*time.Second,
		"how long the workload and the nemesis run")
	flagNodes = flag.Int("robustness.nodes", 3, "masters in the cluster (3 or 5)")
	flagSeed  = flag.Int64("robustness.seed", 0,
		"seed of the clients' and the nemesis' choices (0: from the clock; the seed used is logged)")
	flagClients   = flag.Int("robustness.clients", 6, "concurrent clients")
	flagMaxErrors = flag.Int("robustness.max-errors", -1,
		"budget of client-visible errors (503s, timeouts, transport errors, any other unexpected answer) over the run; -1: no limit, counts are reported")
	flagRequestTimeout = flag.Duration("robustness.request-timeout", 5*time.Second,
		"deadline of each client request")
	flagOut = flag.String("robustness.out", "",
		"directory for the histories, the porcupine visualization of a failed check and the node logs (default: a temporary directory, removed)")
)

// squallBin is the squall binary TestMain built for the run.
var squallBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(envBrokerAddr) != "" {
		// This binary runs as TestPipeline's broker: no squall needed.
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "squall-robustness-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	squallBin = filepath.Join(dir, "squall")
	out, err := exec.Command("go", "build", "-o", squallBin, "github.com/squallhq/squall/cmd/squall").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build squall: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// outDir returns the directory of a test's artifacts: a subdirectory of
// -robustness.out named for the test, or a temporary directory.
func outDir(t *testing.T) string {
	t.Helper()
	if *flagOut == "" {
		return t.TempDir()
	}
	dir := filepath.Join(*flagOut, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
