package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/polltest"
)

// TestInstallRecipe runs the lines of docs/install.md, "A cluster on one
// machine", with the built binary first on PATH and the recipe's ports
// replaced by free ones: a broker, three masters, a satellite and an
// engine, started in the background by one bash script. squall status
// then lists the three members and both fleet members (exit 0), and
// exits 2 once a master is stopped, and once two are (no leader).
func TestInstallRecipe(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed; CI needs it")
		}
		t.Skip("curl is not installed (apt-get install curl)")
	}
	t.Parallel()
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### A cluster on one machine\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/install.md: no sh block under \"### A cluster on one machine\"")
	}
	// Every address of the recipe gets a free port of its own.
	ports := map[string]string{}
	script := regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllStringFunc(block, func(addr string) string {
		if _, ok := ports[addr]; !ok {
			ports[addr] = freeAddr(t)
		}
		return ports[addr]
	})
	// Each process started in the background is listed, in start order.
	var lines []string
	for _, line := range strings.Split(script, "\n") {
		lines = append(lines, line)
		if strings.HasSuffix(line, " &") {
			lines = append(lines, "echo $! >> ../recipe.pids")
		}
	}
	script = strings.Join(lines, "\n")
	master1 := "http://" + ports["127.0.0.1:8080"]
	masters := master1 + ",http://" + ports["127.0.0.1:8180"] + ",http://" + ports["127.0.0.1:8280"]

	dir := t.TempDir()
	bin := squallBinary(t)
	logFile, err := os.Create(filepath.Join(dir, "recipe.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// The processes the script started in the background go on after
	// it, in its process group.
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Files, not pipes: the background processes keep them open.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { stopGroup(t, pgid) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	recipeLog := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the recipe failed: %v\n%s", err, recipeLog())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the recipe did not end within 2 minutes:\n%s", recipeLog())
	}
	if out := recipeLog(); !strings.Contains(out, "MEMBER") || !strings.Contains(out, "webhooks/trial.json: ok, webhook trial") {
		t.Fatalf("the recipe's output has no status table or webhook check:\n%s", out)
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "recipe.pids"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(pidText))
	if len(pids) != 6 {
		t.Fatalf("background processes %v, want 6 (broker, 3 masters, satellite, engine):\n%s", pids, recipeLog())
	}
	for i, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("background process %d of 6 (broker, m1, m2, m3, satellite, engine) exited:\n%s", i+1, recipeLog())
		}
	}

	status := func() (int, statusReport, string) {
		code, out, errOut := runBinary(t, "status", "--json", "--master", masters, "--token-file", filepath.Join(dir, "squall-trial", "ops.token"))
		var rep statusReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, out, errOut)
		}
		return code, rep, errOut
	}
	// The fleet members appear with their first heartbeat.
	var rep statusReport
	var code int
	inFleet := func() bool {
		code, rep, _ = status()
		roles := map[string]string{}
		for _, m := range rep.Fleet {
			roles[m.ID] = m.Role
		}
		return code == 0 && roles["sat1"] == "satellite" && roles["engine1"] == "engine"
	}
	if !polltest.Until(t.Context(), 30*time.Second, inFleet) {
		t.Fatalf("status: exit %d, report %+v; want sat1 and engine1 in the fleet\n%s", code, rep, recipeLog())
	}
	if !rep.Healthy || rep.LeaderID == "" || len(rep.Members) != 3 || rep.Active == nil || rep.Active.Rules == nil {
		t.Fatalf("status report %+v", rep)
	}
	for _, m := range rep.Members {
		if !m.Voter || m.State == "" || m.AppliedIndex == nil || m.Health != "ready" {
			t.Errorf("member %+v", m)
		}
	}

	// m3 (the fourth process) stops: status exits 2 and says which.
	m3, err := strconv.Atoi(pids[3])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m3, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var errOut string
	if !polltest.Until(t.Context(), 30*time.Second, func() bool {
		code, rep, errOut = status()
		return code == statusExitUnhealthy && !rep.Healthy && strings.Contains(errOut, "unhealthy") &&
			strings.Contains(strings.Join(rep.Problems, "\n"), ports["127.0.0.1:8280"])
	}) {
		t.Fatalf("status with m3 stopped: exit %d, problems %q, stderr %s", code, rep.Problems, errOut)
	}

	// m2 stops too: no quorum, no leader.
	m2, err := strconv.Atoi(pids[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m2, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !polltest.Until(t.Context(), 30*time.Second, func() bool {
		code, rep, errOut = status()
		return code == statusExitUnhealthy && rep.LeaderID == "" && strings.Contains(strings.Join(rep.Problems, "\n"), "no leader")
	}) {
		t.Fatalf("status with m2 and m3 stopped: exit %d, leader %q, problems %q, stderr %s", code, rep.LeaderID, rep.Problems, errOut)
	}
}

// stopGroup stops the processes of process group pgid: SIGTERM, then
// SIGKILL to whatever is left after 20 seconds.
func stopGroup(t *testing.T, pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if !polltest.Until(context.Background(), 20*time.Second, func() bool { return syscall.Kill(-pgid, 0) != nil }) {
		t.Logf("process group %d still running 20s after SIGTERM: killed", pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
