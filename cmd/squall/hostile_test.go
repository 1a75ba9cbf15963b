package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMaster_HostileRequests runs the attacks against the real
// binary: bad JSON without a token is a 401 (it was a 400), a body that
// never ends without a token is answered at once, and 1 MiB of '[' with a
// valid token is a 400 while the master keeps serving.
func TestMaster_HostileRequests(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	token := strings.TrimSpace(mustRun(t, squallBinary(t), "token", "--user", "scanner", "--auth", "findings=root,acme:findings_read,findings_write", "--unsigned"))
	send := func(method, path, tok string, body io.Reader) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	if r, b := send("POST", "/api/v2_beta/event/active/all", "", strings.NewReader("{bad json")); r.StatusCode != http.StatusUnauthorized || !strings.Contains(b, `"code":"UNAUTHORIZED"`) {
		t.Fatalf("bad JSON without a token: %d %s", r.StatusCode, b)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	r, b := send("PUT", "/intel/api/sdk/v0/findings/credentials", "", pr)
	if r.StatusCode != http.StatusUnauthorized || !r.Close {
		t.Fatalf("endless body without a token: %d (close %v) %s", r.StatusCode, r.Close, b)
	}

	for range 4 {
		r, b = send("PUT", "/intel/api/sdk/v0/findings/credentials", token, bytes.NewReader(bytes.Repeat([]byte("["), 1<<20)))
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(b, "nests deeper than 128") {
			t.Fatalf("1 MiB of '[': %d %.300s", r.StatusCode, b)
		}
	}
	if r, b := send("GET", "/healthz", "", nil); r.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d %s", r.StatusCode, b)
	}
}
