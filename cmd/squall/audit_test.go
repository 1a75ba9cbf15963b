package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
)

// TestAuditVerify runs `squall audit verify` against a live master, its
// backup file, and a copy of the backup with one record altered (exit 1,
// naming the record); without a source it exits 2. The master's
// --audit-log file holds the same records.
func TestAuditVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sinkFile := filepath.Join(dir, "audit.jsonl")
	base := startMaster(t, "--allow-unsigned-tokens", "--audit-log", sinkFile)
	tokenFile, token := adminTokenFile(t, dir)
	call := func(method, path, body string) []byte {
		t.Helper()
		return apitest.MustCall(t, method, base+path, token, body)
	}
	draft := apitest.NewDraft(t, base, token)
	apitest.AddRuleset(t, base, token, draft, "rs1")
	apitest.Deploy(t, base, token, draft, "")
	call("DELETE", "/api/v2_beta/config/drafts/all/"+draft, "")

	out := mustRun(t, "audit", "verify", "--master", base, "--token-file", tokenFile)
	if !strings.HasPrefix(out, "audit chain verified: ") {
		t.Fatalf("verify --master: %s", out)
	}
	records := call("GET", "/squall/v1/audit?limit=1000", "")
	var list struct{ Records []struct{ Hash string } }
	if err := json.Unmarshal(records, &list); err != nil || len(list.Records) < 4 {
		t.Fatalf("audit list %s: %v", records, err)
	}
	// A separate process gives no signal to wait on: poll, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(sinkFile)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) == len(list.Records) && strings.Contains(lines[len(lines)-1], list.Records[0].Hash) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--audit-log holds %d lines, want %d:\n%s", len(lines), len(list.Records), b)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	backup := call("GET", "/squall/v1/backup", "")
	file := filepath.Join(dir, "backup.json")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, "audit", "verify", "--backup", file); got != out {
		t.Fatalf("verify --backup: %q, want %q", got, out)
	}

	// fails runs verify expecting exit code, and returns its stderr.
	fails := func(code int, args ...string) string {
		t.Helper()
		got, stdout, stderr := runBinary(t, append([]string{"audit", "verify"}, args...)...)
		if got != code || stdout != "" {
			t.Fatalf("audit verify %v: exit %d, want %d\nstdout %s\nstderr %s", args, got, code, stdout, stderr)
		}
		return stderr
	}
	// The draft's creation is the first record by ops.
	altered := bytes.Replace(backup, []byte(`"user":"ops"`), []byte(`"user":"eve"`), 1)
	if bytes.Equal(altered, backup) {
		t.Fatalf("no record by ops in the backup: %s", backup)
	}
	if err := os.WriteFile(file, altered, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := fails(1, "--backup", file); !strings.Contains(msg, "audit chain broken at record ") || !strings.Contains(msg, "altered") {
		t.Fatalf("verify an altered backup: %s", msg)
	}
	if msg := fails(2); !strings.Contains(msg, "--master") {
		t.Fatalf("verify without a source: %s", msg)
	}
}
