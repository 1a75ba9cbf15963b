package robustness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/proctest"
)

// The helpers of TestPipeline: its processes (squall, built by TestMain,
// and this test binary as the broker) run through proctest.

// startPipeProc starts a process of the pipeline as proctest.Start does;
// the kernel kills it if this test binary dies.
func startPipeProc(t *testing.T, name string, cmd *exec.Cmd, msg, key string) *proctest.Proc {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = procAttr() // no orphan outlives a killed test binary
	}
	return proctest.Start(t, name, cmd, msg, key)
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
