package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// TestTokenFileMode: every command that reads an API token file
// (--token-file, a satellite's --master-token-file) refuses
// one that group or others may read, before it sends anything, with the
// file's mode and the chmod that fixes it; an empty one is refused too.
func TestTokenFileMode(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	loose := filetest.Write(t, dir, "loose.token", "tok\n")
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	group := filetest.Write(t, dir, "group.token", "tok\n")
	if err := os.Chmod(group, 0o640); err != nil {
		t.Fatal(err)
	}
	empty := filetest.Write(t, dir, "empty.token", "\n")
	commands := map[string]func(token string) []string{
		"status": func(tok string) []string { return []string{"status", "--master", srv.URL, "--token-file", tok} },
		"backup": func(tok string) []string {
			return []string{"backup", "-o", dir + "/b.json", "--master", srv.URL, "--token-file", tok}
		},
		"tree": func(tok string) []string {
			return []string{"tree", "history", "--master", srv.URL, "--token-file", tok}
		},
		"deadletters": func(tok string) []string {
			return []string{"deadletters", "list", "--master", srv.URL, "--token-file", tok}
		},
		"export": func(tok string) []string { return []string{"export", "--master", srv.URL, "--token-file", tok} },
		"engine": func(tok string) []string {
			return []string{"engine", "--master", srv.URL, "--token-file", tok, "--kafka-brokers", "127.0.0.1:1"}
		},
		"bench findings": func(tok string) []string {
			return []string{"bench", "findings", "--url", srv.URL, "--token-file", tok, "--requests", "1"}
		},
		"satellite": func(tok string) []string {
			return []string{"satellite", "--webhooks-dir", t.TempDir(), "--kafka-brokers", "127.0.0.1:1", "--spool-dir", t.TempDir(),
				"--master", srv.URL, "--master-token-file", tok}
		},
	}
	for name, args := range commands {
		for _, tc := range []struct {
			file, want string
		}{
			{loose, "readable by group or others (mode 0644): make it readable by its owner only: chmod 600 " + loose},
			{group, "readable by group or others (mode 0640): make it readable by its owner only: chmod 600 " + group},
			{empty, empty + " is empty"},
		} {
			code, out, errOut := runSquall(t, "", args(tc.file)...)
			if code == 0 || !strings.Contains(errOut, "token-file") || !strings.Contains(errOut, tc.want) {
				t.Errorf("%s with %s: exit %d, stdout %q, stderr %q, want %q", name, tc.file, code, out, errOut, tc.want)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the commands sent %d requests with a refused token file", n)
	}
}
