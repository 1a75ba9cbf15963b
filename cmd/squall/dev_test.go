package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/dev"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
)

// readmeTourHeading starts the README section whose sh blocks
// TestDevReadmeTour runs.
const readmeTourHeading = "## Five-minute tour"

// readmeAddr is the address the README's commands use.
const readmeAddr = "127.0.0.1:8080"

// readmeTour returns the commands of the sh blocks of the README's tour,
// in order: a command spans continuation lines and quoted newlines;
// comment lines are left out.
func readmeTour(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+readmeTourHeading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", readmeTourHeading)
	}
	section := text[i+1:]
	if j := strings.Index(section[len(readmeTourHeading):], "\n## "); j >= 0 {
		section = section[:len(readmeTourHeading)+j]
	}
	var cmds []string
	for _, c := range shCommands(section) {
		cmds = append(cmds, strings.TrimSpace(c.text))
	}
	return cmds
}

// devProcess is a running squall dev.
type devProcess struct {
	p    *proctest.Proc
	addr string
	out  string // file of its standard output
}

// startDev starts squall dev in dir (data dir ./squall-data, free ports
// for HTTP and the broker unless args say otherwise) and waits until
// /readyz answers 200: the master, the intake and the engine are ready.
func startDev(t *testing.T, dir string, args ...string) *devProcess {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := squallCmd(t, nil, append([]string{"dev", "--http", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Stdout = out
	p := startRole(t, "dev", cmd)
	p.WaitReady(t)
	return &devProcess{p: p, addr: p.Addr, out: out.Name()}
}

// pause waits a little between two polls of a separate process, which
// gives no signal to wait on (every poll loop is bounded by a deadline).
func pause(t *testing.T) {
	t.Helper()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}

// stop sends sig (SIGINT, Ctrl-C, or SIGTERM) and checks that squall dev
// exits 0 after a clean shutdown of every component.
func (d *devProcess) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := d.p.End(t, sig); err != nil {
		t.Fatalf("squall dev: %v\n%s", err, d.p.Logs.String())
	}
	logs := d.p.Logs.String()
	checkLogLines(t, logs)
	for _, msg := range []string{"master stopped", "satellite stopped", "consumer stopped", "squall dev stopped"} {
		if !strings.Contains(logs, `"msg":"`+msg+`"`) {
			t.Errorf("no %q in the log:\n%s", msg, logs)
		}
	}
}

// sh runs a command with bash in dir and returns its standard output.
func sh(t *testing.T, dir, command string) (string, error) {
	t.Helper()
	c := exec.CommandContext(t.Context(), "bash", "-c", command)
	c.Dir = dir
	out, err := c.Output()
	return string(out), err
}

// curlStatus runs a curl command with its status appended and returns the
// body and the status.
func curlStatus(t *testing.T, dir, command string) (string, int) {
	t.Helper()
	out, err := sh(t, dir, command+` -w '\n%{http_code}'`)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	out = strings.TrimSpace(out)
	i := strings.LastIndexByte(out, '\n')
	code, _ := strconv.Atoi(out[i+1:])
	return strings.TrimSpace(out[:max(i, 0)]), code
}

// archiveLines waits until the archive file has n lines and returns them.
func archiveLines(t *testing.T, d *devProcess, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(b) > 0 && len(lines) >= n {
			if len(lines) > n {
				t.Fatalf("archive has %d lines, want %d:\n%s", len(lines), n, b)
			}
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("archive %s has not %d lines within 30s:\n%s\n%s", path, n, b, d.p.Logs.String())
		}
		pause(t)
	}
}

// archived is one line of the example's archive.
type archived struct {
	Host        string  `json:"host"`
	UsedPercent float64 `json:"used_percent"`
	Event       struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
		Payload  map[string]string `json:"payload"`
	} `json:"event"`
}

func parseArchived(t *testing.T, line string) archived {
	t.Helper()
	var a archived
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("archive line %s: %v", line, err)
	}
	return a
}

// TestDevReadmeTour starts the real squall dev, runs the README's tour
// with curl (its address replaced by the test's), checks the archive,
// stops it with SIGINT (Ctrl-C), and restarts it on the same data dir: the tree,
// the archive, the token key and an edited webhook file survive, and a new
// webhook is processed exactly once; SIGTERM stops it as cleanly.
func TestDevReadmeTour(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's tour (.ci/run installs it)")
	}
	work := t.TempDir()
	d := startDev(t, work)
	data := filepath.Join(work, "squall-data")
	archive := filepath.Join(data, "archive", dev.ArchiveFile)

	cmds := readmeTour(t)
	if len(cmds) != 5 {
		t.Fatalf("the README's tour has %d commands, want 5 (two tokens, webhook, archive, test event): %q", len(cmds), cmds)
	}
	var prelude strings.Builder // the variables the tour sets
	var sawWebhook, sawArchive, sawTest bool
	for _, c := range cmds {
		isVar := strings.HasPrefix(c, "TOKEN=") || strings.HasPrefix(c, "WEBHOOK_TOKEN=")
		if !strings.Contains(c, readmeAddr) && !strings.HasPrefix(c, "cat ") && !isVar {
			t.Fatalf("unexpected tour command %q", c)
		}
		c = strings.ReplaceAll(c, readmeAddr, d.addr)
		switch {
		case isVar:
			prelude.WriteString(c + "\n")
		case strings.Contains(c, "/engine/webhook/event/"):
			sawWebhook = true
			body, code := curlStatus(t, work, prelude.String()+c)
			var ack struct {
				EventID string `json:"event_id"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &ack) != nil || ack.EventID == "" {
				t.Fatalf("%s\nanswered %d: %s", c, code, body)
			}
		case strings.HasPrefix(c, "cat "):
			sawArchive = true
			if filepath.Join(work, strings.TrimPrefix(c, "cat ")) != archive {
				t.Fatalf("the tour shows %s, the example archives to %s", c, archive)
			}
			archiveLines(t, d, archive, 1)
			out, err := sh(t, work, prelude.String()+c)
			if a := parseArchived(t, strings.TrimSpace(out)); err != nil || a.Host != "web-1" || a.UsedPercent != 95 ||
				a.Event.Type != "disk_alert" || a.Event.Metadata["tenant_id"] != "master" || a.Event.Payload["message"] != "Disk 95% full on /var" {
				t.Fatalf("%s: %v: %s", c, err, out)
			}
		case strings.Contains(c, "/api/v2_beta/event/active/"):
			sawTest = true
			body, code := curlStatus(t, work, prelude.String()+c)
			if code != http.StatusOK || !strings.Contains(body, `"name":"archive_disk_alerts","status":"Matched"`) ||
				!strings.Contains(body, `"extracted_vars":{"archive_disk_alerts":{"used_percent":95}}`) {
				t.Fatalf("%s\nanswered %d: %s", c, code, body)
			}
		default:
			t.Fatalf("unexpected tour command %q", c)
		}
	}
	if !sawWebhook || !sawArchive || !sawTest {
		t.Fatalf("the tour lacks a webhook (%t), the archive (%t) or a test event (%t)", sawWebhook, sawArchive, sawTest)
	}
	// The test event skipped its actions: still one archived event.
	archiveLines(t, d, archive, 1)

	// The example webhook's token is random per data dir (dev's
	// TestPrepareDir); the calls below carry it.
	hookToken := readTrimmed(t, filepath.Join(data, dev.WebhookTokenFile))

	// DNS rebinding: a page of evil.example whose name now resolves to
	// 127.0.0.1 reaches the listener, but its requests name its host.
	// They are refused, with the unsigned admin token, on every route.
	mallory := unsignedAdmin(t)
	for _, path := range []string{"/api/v2_beta/config/active/tree/info/all", "/engine/webhook/event/disk_alerts?token=" + hookToken,
		"/intel/api/sdk/v0/findings/credential", "/squall/v1/cluster", "/metrics", dev.EnginePrefix + "/readyz"} {
		for _, host := range []string{"evil.example", "evil.example:" + port(d.addr), "localhost.evil.example", "127.0.0.1.nip.io"} {
			body, code := curlStatus(t, work, `curl -sS -X POST "http://`+d.addr+path+`" -H 'Host: `+host+`' -H "Authorization: Bearer `+mallory+`" -H "Content-Type: application/json" -d '{"host": "evil", "message": "1%"}'`)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, `"code":"MISDIRECTED_REQUEST"`) {
				t.Errorf("Host %q on %s: %d %s, want 421 MISDIRECTED_REQUEST", host, path, code, body)
			}
		}
	}
	// localhost and loopback names of the same listener are served.
	for _, host := range []string{"localhost", "LOCALHOST:" + port(d.addr), "127.0.0.1", "127.0.0.2:1", "[::1]:" + port(d.addr), d.addr} {
		if body, code := curlStatus(t, work, `curl -sS "http://`+d.addr+`/api/v2_beta/config/active/tree/info/all" -H 'Host: `+host+`' -H "Authorization: Bearer `+mallory+`"`); code != http.StatusOK {
			t.Errorf("Host %q: %d %s, want 200", host, code, body)
		}
	}
	archiveLines(t, d, archive, 1) // the refused webhooks archived nothing

	// A second squall dev on the same data dir stops at the master's
	// locked files, before it touches the broker's.
	second := squallCmdContext(t.Context(), t, nil, "dev", "--http", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0")
	second.Dir = work
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "is another squall dev running on squall-data?") ||
		strings.Contains(string(out), "squall dev started") {
		t.Errorf("a second squall dev on the same data dir: %v\n%s", err, out)
	}

	// One address serves the ops endpoints of every component.
	if body, code := curlStatus(t, work, `curl -sS "http://`+d.addr+dev.EnginePrefix+`/readyz"`); code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Errorf("engine readyz: %d %s", code, body)
	}
	metrics, code := curlStatus(t, work, `curl -sS "http://`+d.addr+`/metrics"`)
	for _, want := range []string{
		"squall_store_raft_leader 1", `squall_intake_requests_total{`, "squall_engine_", `squall_action_executed_total{action="archive"} 1`,
	} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	// The banner names the same commands, with the real address.
	banner, err := os.ReadFile(d.out)
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(data, dev.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"admin token   " + strings.TrimSpace(string(token)),
		`curl -sS -X POST "http://` + d.addr + `/engine/webhook/event/disk_alerts?token=$(cat ` + filepath.Join("squall-data", dev.WebhookTokenFile) + `)"`,
		"cat " + filepath.Join("squall-data", "archive", dev.ArchiveFile),
		`curl -sS -X POST "http://` + d.addr + `/api/v2_beta/event/active/all"`,
		"WARNING: dev mode also accepts unsigned tokens",
	} {
		if !strings.Contains(string(banner), want) {
			t.Errorf("the banner lacks %q:\n%s", want, banner)
		}
	}
	// Unsigned tokens are accepted, with a warning line in the log.
	unsigned := unsignedToken(t, "bob", "all=root:view")
	if _, code := curlStatus(t, work, `curl -sS "http://`+d.addr+`/api/v2_beta/config/active/tree/info/all" -H "Authorization: Bearer `+unsigned+`"`); code != http.StatusOK {
		t.Errorf("an unsigned token: %d", code)
	}
	if !strings.Contains(d.p.Logs.String(), `"level":"WARN","msg":"dev mode: unsigned tokens are accepted`) {
		t.Error("no warning about unsigned tokens in the log")
	}
	d.stop(t, os.Interrupt)

	// Edit the example webhook: a restart must keep the edit.
	hook := filepath.Join(data, "webhooks", dev.WebhookID+".json")
	b, err := os.ReadFile(hook)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte(strings.Replace(string(b), hookToken, "edited-token-0123456789", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	d = startDev(t, work)
	logs := d.p.Logs.String()
	if strings.Contains(logs, "deployed the example tree") || !strings.Contains(logs, `"first_start":false`) {
		t.Errorf("the restart seeded again:\n%s", logs)
	}
	// The first start's admin token still works (the key is kept), and
	// the tree is the one deployed then.
	body, code := curlStatus(t, work, `curl -sS "http://`+d.addr+`/api/v2_beta/config/active/tree/info/all" -H "Authorization: Bearer `+strings.TrimSpace(string(token))+`"`)
	if code != http.StatusOK || body != `{"filters_count":2,"iterators_count":0,"rules_count":1}` {
		t.Errorf("tree info after the restart: %d %s", code, body)
	}
	post := `curl -sS -X POST "http://` + d.addr + `/engine/webhook/event/disk_alerts?token=%s" -H "Content-Type: application/json" -d '{"host": "web-2", "message": "Disk 42% full on /home"}'`
	if _, code := curlStatus(t, work, strings.Replace(post, "%s", hookToken, 1)); code != http.StatusUnauthorized {
		t.Errorf("the seeded token after the edit: %d, want 401", code)
	}
	if body, code := curlStatus(t, work, strings.Replace(post, "%s", "edited-token-0123456789", 1)); code != http.StatusOK {
		t.Fatalf("webhook after the restart: %d %s", code, body)
	}
	// Two lines: the first start's event, not processed again, then the
	// new one (one partition, one key: in order).
	lines := archiveLines(t, d, archive, 2)
	if a := parseArchived(t, lines[0]); a.Host != "web-1" {
		t.Errorf("first archived event %s", lines[0])
	}
	if a := parseArchived(t, lines[1]); a.Host != "web-2" || a.UsedPercent != 42 {
		t.Errorf("archived event after the restart %s", lines[1])
	}
	d.stop(t, syscall.SIGTERM)
}

// TestDevFlags: bad flags are refused before anything starts.
func TestDevFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--log-level", "loud"}, "--log-level"},
		{[]string{"dev", "--http", "8080"}, "--http"},
		{[]string{"dev", "--kafka-addr", "9093"}, "--kafka-addr"},
		{[]string{"dev", "extra"}, "unknown command"},
	} {
		dir := t.TempDir()
		code, _, stderr := runSquall(t, "", append(tc.args, "--data-dir", filepath.Join(dir, "d"))...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
			t.Errorf("%v created the data dir", tc.args)
		}
	}
}

// TestDevFindingAction: in squall dev, a rule's finding action inserts
// into the process's own findings API as tenant master, with no settings
// in actions.json.
func TestDevFindingAction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDev(t, dir)
	base := "http://" + d.addr
	b, err := os.ReadFile(filepath.Join(dir, "squall-data", dev.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	apitest.DeployTree(t, base, token, []byte(`{"version": "1.1", "Filter": {"name": "root",
	  "filter": {"description": "", "active": true, "filter": {}},
	  "nodes": [{"Ruleset": {"name": "leaks", "rules": [{"name": "leak", "description": "", "continue": true, "active": true,
	    "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "disk_alert"}, "WITH": {}},
	    "actions": [{"id": "finding", "payload": {"monitored_domain_id": 7, "tool_code": "dev",
	      "resource_url": "https://${event.payload.host}/login", "username": "admin@example.com",
	      "password": "${event.payload.message}"}}]}]}}]}}`))

	// The engine takes the new tree within a moment: send the webhook
	// again until its finding is there (the same finding is stored once).
	type view struct {
		Total    int `json:"total"`
		Findings []struct {
			Organization struct {
				Name string `json:"name"`
			} `json:"organization"`
			PlainText string `json:"plain_text"`
			Hostname  struct {
				Data string `json:"data"`
			} `json:"hostname"`
		} `json:"findings"`
	}
	hook := base + "/engine/webhook/event/" + dev.WebhookID + "?token=" + readTrimmed(t, filepath.Join(dir, "squall-data", dev.WebhookTokenFile))
	body := postUntilFinding(t, d, base, token, func() {
		code, body := apitest.Call(t.Context(), http.MethodPost, hook, "",
			strings.NewReader(`{"host": "web-1", "message": "s3cret"}`), "application/json")
		if code != http.StatusOK {
			t.Fatalf("webhook: %d %s", code, body)
		}
	})
	var got view
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if f := got.Findings[0]; got.Total != 1 || f.Organization.Name != dev.Tenant || f.PlainText != "s3cret" || f.Hostname.Data != "web-1" {
		t.Fatalf("findings %+v", got)
	}
	d.stop(t, syscall.SIGTERM)
}

// postUntilFinding calls post (which sends a webhook) and lists dev's
// credential findings with token until one is there, sending the webhook
// again after every ten empty lists (the engine takes a new tree within a
// moment, and the same finding is stored once), and returns the list's
// body; it fails the test with dev's logs after 30 s.
func postUntilFinding(t *testing.T, d *devProcess, base, token string, post func()) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no finding within 30s:\n%s", d.p.Logs.String())
		}
		post()
		for range 10 {
			code, body := apitest.Call(t.Context(), http.MethodGet, base+"/intel/api/sdk/v0/findings/credential", token, nil, "")
			var list struct {
				Total int `json:"total"`
			}
			if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
				t.Fatalf("list findings: %d %s", code, body)
			}
			if list.Total > 0 {
				return body
			}
			pause(t)
		}
	}
}

// port returns the port of a host:port address.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// unsignedAdmin returns an unsigned admin token, which squall dev accepts.
func unsignedAdmin(t *testing.T) string {
	t.Helper()
	return unsignedToken(t, "mallory", "all=root:admin")
}

// TestDevAttach attaches a real squall satellite to squall dev's broker at
// a fixed --kafka-addr: its webhooks reach dev's engine, before and after
// dev restarts on the same address. The pid file names the running process
// and is gone once it stopped.
func TestDevAttach(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kafkaAddr := ln.Addr().String()
	ln.Close()
	work := t.TempDir()
	d := startDev(t, work, "--kafka-addr", kafkaAddr)
	data := filepath.Join(work, "squall-data")
	pid, err := os.ReadFile(filepath.Join(data, dev.PIDFile))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(d.p.Cmd.Process.Pid) {
		t.Fatalf("pid file: %q %v, want %d", pid, err, d.p.Cmd.Process.Pid)
	}
	if banner, _ := os.ReadFile(d.out); !strings.Contains(string(banner), "Kafka broker  "+kafkaAddr) {
		t.Errorf("the banner does not name the broker %s:\n%s", kafkaAddr, banner)
	}

	// The satellite serves dev's example webhook (same file, same token).
	hooks := filepath.Join(t.TempDir(), "webhooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hook, err := os.ReadFile(filepath.Join(data, "webhooks", dev.WebhookID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, hooks, dev.WebhookID+".json", string(hook))
	token, err := os.ReadFile(filepath.Join(data, dev.WebhookTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	satURL := "http://" + startSatellite(t, nil, "--name", "attached",
		"--kafka-brokers", kafkaAddr, "--webhooks-dir", hooks, "--spool-dir", filepath.Join(t.TempDir(), "spool")).Addr +
		"/engine/webhook/event/" + dev.WebhookID + "?token=" + strings.TrimSpace(string(token))
	post := func() {
		t.Helper()
		resp, err := calltest.Client().Post(satURL, "application/json", strings.NewReader(`{"host": "sat-1", "message": "Disk 91% full on /"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook through the attached satellite: %d", resp.StatusCode)
		}
	}
	archive := filepath.Join(data, dev.ArchiveDir, dev.ArchiveFile)
	post()
	if lines := archiveLines(t, d, archive, 1); !strings.Contains(lines[0], `"host":"sat-1"`) {
		t.Errorf("archived: %s", lines[0])
	}

	// dev restarts on the same broker address: the satellite, still
	// running, delivers again.
	d.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(data, dev.PIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after the stop: %v", err)
	}
	d = startDev(t, work, "--kafka-addr", kafkaAddr)
	post()
	archiveLines(t, d, archive, 2)
	d.stop(t, os.Interrupt)
}
