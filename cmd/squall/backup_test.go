package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/store"
)

// TestBackupRestore runs squall backup and squall restore against a
// master binary: the file is complete and private, a bad file is refused
// before anything is sent, a good one restores, and both go through
// answers 503 NO_LEADER (up to --attempts) and stop at once on a 403.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	stateIndex := func() uint64 {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/squall/v1/cluster", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := calltest.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var info master.ClusterInfo
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			t.Fatal(err)
		}
		return info.StateIndex
	}
	// A draft, so that the backup holds one.
	draft := apitest.NewDraft(t, base, token)
	// Deployed, it is the active tree's version, which squall status shows.
	apitest.Deploy(t, base, token, draft, "first")
	code, out, errOut := runSquall(t, "", "status", "--json", "--master", base, "--token-file", tokenFile)
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status: exit %d (%v), stdout %s, stderr %s", code, err, out, errOut)
	}
	if v := rep.Active.Version; !rep.Healthy || len(rep.Members) != 1 || rep.Draft == nil || rep.Draft.ID != draft ||
		v == nil || v.Author != "ops" || v.Message != "first" || len(rep.Errors) != 0 {
		t.Fatalf("status of one master with a deployed draft: %s", out)
	}
	code, out, _ = runSquall(t, "", "status", "--master", base, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "version 1 deployed ") || !strings.Contains(out, "by ops") || !strings.Contains(out, "Draft: "+draft+", owner ops") {
		t.Fatalf("status table: exit %d\n%s", code, out)
	}

	file := filepath.Join(dir, "backup.json")
	code, out, errOut = runSquall(t, "", "backup", "-o", file, "--master", base, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "draft yes") {
		t.Fatalf("backup: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v", err, st.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".backup.json.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CheckBackup(strings.NewReader(string(b))); err != nil {
		t.Fatal(err)
	}

	// Bad files are refused before anything is sent.
	before := stateIndex()
	for name, content := range map[string]string{
		"truncated.json": string(b[:len(b)/2]),
		"newer.json":     strings.Replace(string(b), `"format":`+strconv.Itoa(store.BackupFormat), `"format":99`, 1),
		"other.json":     `{"nodes": []}`,
	} {
		bad := filepath.Join(dir, name)
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runSquall(t, "", "restore", bad, "--master", base, "--token-file", tokenFile)
		if code != 1 || !strings.Contains(errOut, bad+" is not a valid backup file, nothing was restored") {
			t.Errorf("restore %s: exit %d, stderr %q", name, code, errOut)
		}
	}
	if after := stateIndex(); after != before {
		t.Fatalf("a refused restore changed the state: index %d -> %d", before, after)
	}

	code, out, errOut = runSquall(t, "", "restore", file, "--master", base, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "restored "+file) {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after := stateIndex(); after <= before {
		t.Fatalf("the restore left the state index at %d", after)
	}

	// A front that answers 503 NO_LEADER to the first requests, then
	// passes them to the master.
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refuse, seen atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if refuse.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"NO_LEADER","params":{},"message":"no leader was elected within 3s"}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	for _, args := range [][]string{{"backup", "-o", file}, {"restore", file}} {
		refuse.Store(2)
		seen.Store(0)
		all := append(args, "--master", front.URL, "--token-file", tokenFile, "--progress")
		code, _, errOut := runSquall(t, "", all...)
		if code != 0 || seen.Load() != 3 || strings.Count(errOut, "503 NO_LEADER: no leader was elected within 3s; trying again") != 2 ||
			!regexp.MustCompile(`(?m)^`+args[0]+`: [0-9.]+ MiB( of [0-9.]+ MiB \(100%\))?, [0-9.]+ MiB/s$`).MatchString(errOut) {
			t.Errorf("%s through two 503s: exit %d after %d requests, stderr %q", args[0], code, seen.Load(), errOut)
		}
		refuse.Store(100)
		seen.Store(0)
		code, _, errOut = runSquall(t, "", append(all, "--attempts", "2")...)
		if code != 1 || seen.Load() != 2 || !strings.Contains(errOut, "(gave up after 2 attempts)") {
			t.Errorf("%s with no leader: exit %d after %d requests, stderr %q", args[0], code, seen.Load(), errOut)
		}
	}
	// Refused: no retry.
	viewer := filepath.Join(dir, "viewer.token")
	if err := os.WriteFile(viewer, []byte(unsignedToken(t, "v", "all=root:view")), 0o600); err != nil {
		t.Fatal(err)
	}
	refuse.Store(0)
	seen.Store(0)
	code, _, errOut = runSquall(t, "", "backup", "-o", filepath.Join(dir, "refused.json"), "--master", front.URL, "--token-file", viewer)
	if code != 1 || seen.Load() != 1 || !strings.Contains(errOut, "403") {
		t.Errorf("backup with a view token: exit %d after %d requests, stderr %q", code, seen.Load(), errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "refused.json")); !os.IsNotExist(err) {
		t.Errorf("a refused backup wrote its file: %v", err)
	}
}
