package findings_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/store"
)

func testSealer(t *testing.T) *findings.Sealer {
	t.Helper()
	path := filetest.Write(t, t.TempDir(), "findings.key", strings.Repeat("ab", 32)+"\n")
	s, err := findings.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLoadKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"short": "abcd", "not hex": strings.Repeat("zz", 32)} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := findings.LoadKey(path); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := findings.LoadKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
	loose := filetest.Write(t, dir, "loose", strings.Repeat("ab", 32))
	if err := os.Chmod(loose, 0o604); err != nil {
		t.Fatal(err)
	}
	if _, err := findings.LoadKey(loose); err == nil || !strings.Contains(err.Error(), "chmod 600 "+loose) {
		t.Errorf("world-readable key: %v", err)
	}
}

// TestSealer_AtRest inserts through the API with a findings key on a
// one-node store, and checks that the password is in no file of the data
// dir (raft log, state file, snapshot), that reads decrypt it, that
// password-only findings still deduplicate, and that an API without the
// key refuses to show it.
func TestSealer_AtRest(t *testing.T) {
	dir := t.TempDir()
	st, err := store.New(store.Config{
		NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true,
		Registerer:       prometheus.NewRegistry(),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	if _, _, err := st.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	verifier := &auth.Verifier{AllowUnsigned: true}
	cfg := findings.Default()
	cfg.Sealer = testSealer(t)
	srv := httptest.NewServer(findings.New(cfg, st, verifier, nil).Handler())
	t.Cleanup(srv.Close)
	nokey := httptest.NewServer(findings.New(findings.Default(), st, verifier, nil).Handler())
	t.Cleanup(nokey.Close)
	tok := auth.EncodeUnsigned(auth.FindingsClaims("u", "acme", auth.FindingsRead, auth.FindingsWrite))

	call := func(base, method, path, body string) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+"/intel/api/sdk/v0"+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, b := calltest.Do(t, calltest.Client().Do, req)
		return resp.StatusCode, b
	}
	const secret = "Correct-Horse-Battery-Staple-42"
	body := `{"monitored_domain_id": 3, "tool_code": "leakmon", "resource_url": "https://example.com/", "username": "jane", "password": "` + secret + `"}`
	status, b := call(srv.URL, "PUT", "/findings/credentials", body)
	if status != http.StatusCreated {
		t.Fatalf("insert: %d %s", status, b)
	}
	var u struct{ UID string }
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	// A password-only duplicate is recognized although encrypted.
	if status, b := call(srv.URL, "PUT", "/findings/credentials", body); status != http.StatusCreated || !bytes.Contains(b, []byte(u.UID)) {
		t.Fatalf("duplicate: %d %s", status, b)
	}
	status, b = call(srv.URL, "GET", "/finding/"+u.UID, "")
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"plain_text":"`+secret+`"`)) {
		t.Fatalf("get: %d %s", status, b)
	}
	if status, b := call(nokey.URL, "GET", "/findings/credential", ""); status != http.StatusInternalServerError || bytes.Contains(b, []byte(secret)) {
		t.Fatalf("list without the key: %d %s", status, b)
	}
	stored, err := st.Finding("acme", u.UID)
	if err != nil || !strings.HasPrefix(stored.Password, "enc:v1:") {
		t.Fatalf("stored password %q, %v", stored.Password, err)
	}

	// A control: a password inserted without the key is stored in clear,
	// and the scan below must find it in the log, the state file and the
	// snapshot (so it does read what the store wrote).
	const control = "Clear-Control-Password-17"
	cbody := `{"monitored_domain_id": 3, "tool_code": "leakmon", "resource_url": "https://example.com/", "username": "joe", "password": "` + control + `"}`
	if status, b := call(nokey.URL, "PUT", "/findings/credentials", cbody); status != http.StatusCreated {
		t.Fatalf("control insert: %d %s", status, b)
	}

	if err := st.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if clear := filetest.Holding(t, dir, secret); len(clear) > 0 {
		t.Fatalf("%v hold the password in clear", clear)
	}
	withControl := filetest.Holding(t, dir, control)
	if want := []string{"fsm.db", "raft.db", "state.bin"}; !slices.Equal(withControl, want) {
		t.Fatalf("the clear control password is in %v, want %v: the scan does not see what was stored", withControl, want)
	}
}
