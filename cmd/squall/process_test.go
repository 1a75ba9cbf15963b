package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/filetest"
)

// The tests of this package run the real binary: this file builds it,
// runs its commands and starts its long-running roles with proctest.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// squallBinary builds the binary once for the package's tests.
func squallBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "squall-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "squall")
		buildOut, buildErr = exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

// squallCmd returns the command that runs the binary with args, with env
// added to the test's environment.
func squallCmd(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return squallCmdContext(context.Background(), t, env, args...)
}

// squallCmdContext is squallCmd killed when ctx ends.
func squallCmdContext(ctx context.Context, t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, squallBinary(t), args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd
}

// runBinary runs the binary and returns its exit code and outputs.
func runBinary(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runBinaryEnv(t, nil, args...)
}

// runTimeout bounds a command that runBinary runs.
const runTimeout = 5 * time.Minute

// runBinaryEnv is runBinary with env added to the test's environment.
func runBinaryEnv(t testing.TB, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := squallCmdContext(ctx, t, env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("squall %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// mustRun runs the binary, which must succeed, and returns its output.
func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	code, out, errOut := runBinary(t, args...)
	if code != 0 {
		t.Fatalf("squall %v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// unsignedToken returns an unsigned token of user with auth (squall token
// --unsigned).
func unsignedToken(t testing.TB, user, auth string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "token", "--user", user, "--auth", auth, "--unsigned"))
}

// adminTokenFile writes an unsigned admin token (authorization all at the
// root, as squall token --unsigned mints it) into a file of dir, for the
// --token-file of a binary, and returns the file and the token.
func adminTokenFile(t testing.TB, dir string) (file, token string) {
	t.Helper()
	token = unsignedToken(t, "ops", "all=root:admin")
	file = filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, token
}

// archiveActions writes dir/actions.json, the engine's settings for the
// archive executor under dir/archive (archive_type one to one.log, the
// others to default.log), with more (JSON members and a comma) before
// it; it returns the file and the archive folder.
func archiveActions(t testing.TB, dir, more string) (file, archive string) {
	t.Helper()
	archive = filepath.Join(dir, "archive")
	file = filetest.Write(t, dir, "actions.json", fmt.Sprintf(`{%s"archive": {"base_path": %q, "default_path": "/default.log", "paths": {"one": "/one.log"}}}`, more, archive))
	return file, archive
}

// readTrimmed returns the content of a file without its surrounding
// white space.
func readTrimmed(t testing.TB, name string) string {
	t.Helper()
	return strings.TrimSpace(string(mustRead(t, name)))
}

// mustRead returns the content of a file.
func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startRole starts cmd, a long-running command of the binary (master,
// engine, satellite or dev, as cmd.Args[1] says), with proctest.Start: it
// waits for the log line the command writes once it serves, and takes
// that line's address.
func startRole(t testing.TB, name string, cmd *exec.Cmd) *proctest.Proc {
	t.Helper()
	var msg, key string
	switch role := cmd.Args[1]; role {
	case "master":
		msg, key = "master started", "http_addr"
	case "engine":
		msg, key = "ops endpoints listening", "addr"
	case "satellite":
		msg, key = "satellite started", "http"
	case "dev":
		msg, key = "squall dev started", "http_addr"
	default:
		t.Fatalf("squall %s is not a long-running command", role)
	}
	return proctest.Start(t, name, cmd, msg, key)
}

// startMaster starts `squall master --bootstrap` with extra args, waits
// until it is ready and returns its base URL. The process is killed when
// the test ends.
func startMaster(t testing.TB, args ...string) string {
	t.Helper()
	all := append([]string{"master", "--node-id", "m1", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap"}, args...)
	p := startRole(t, "master", squallCmd(t, nil, all...))
	p.WaitReady(t)
	return p.Base
}

// startEngine starts `squall engine` with args and env, its ops endpoints
// on a free port, and waits until they listen.
func startEngine(t testing.TB, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := squallCmd(t, append([]string{"SQUALL_HTTP=127.0.0.1:0"}, env...), append([]string{"engine"}, args...)...)
	return startRole(t, "engine", cmd)
}

// startSatellite starts `squall satellite` on a free port with args and
// env, and waits until it serves.
func startSatellite(t testing.TB, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := squallCmd(t, env, append([]string{"satellite", "--http", "127.0.0.1:0"}, args...)...)
	return startRole(t, "satellite", cmd)
}
