package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
)

// TestSatelliteBinaryGuards runs squall satellite behind a "proxy" (the
// test, trusted by --trusted-proxies given in the environment) with a
// webhook that has allow_ips, dedupe and a rate limit: the forwarded
// address decides, a repeated delivery makes one event and is still known
// after a restart, and a call past the limit is 429 with Retry-After.
func TestSatelliteBinaryGuards(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "webhooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := `{"id": "guarded", "token": "s3cret-0123456789ab",
	  "allow_ips": ["192.0.2.0/24"],
	  "dedupe": {"header": "X-Delivery", "window": "1h"},
	  "rate_limit": {"rate": 0.01, "burst": 3},
	  "collector_config": {"event_type": "push", "payload": {"all": "${@}"}}}`
	filetest.Write(t, hooks, "guarded.json", hook)
	start := func() *proctest.Proc {
		return startSatellite(t, []string{"SQUALL_TRUSTED_PROXIES=127.0.0.1,::1"}, "--webhooks-dir", hooks,
			"--kafka-brokers", broker.Addr, "--spool-dir", filepath.Join(dir, "spool"))
	}
	proc := start()
	base := proc.Base

	type answer struct {
		status     int
		eventID    string
		code       string
		dedup      string
		retryAfter string
	}
	post := func(forwardedFor, delivery string) answer {
		req, _ := http.NewRequest("POST", base+"/engine/webhook/event/guarded?token=s3cret-0123456789ab", strings.NewReader(`{"n": 1}`))
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		req.Header.Set("X-Delivery", delivery)
		resp, raw := calltest.Do(t, calltest.Client().Do, req)
		var body struct {
			EventID string `json:"event_id"`
			Code    string `json:"code"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("answer %q: %v", raw, err)
		}
		return answer{resp.StatusCode, body.EventID, body.Code, resp.Header.Get("Squall-Deduplicated"), resp.Header.Get("Retry-After")}
	}

	first := post("192.0.2.7", "d1")
	if first.status != http.StatusOK || first.eventID == "" {
		t.Fatalf("first delivery: %+v", first)
	}
	if a := post("192.0.2.7", "d1"); a.status != http.StatusOK || a.eventID != first.eventID || a.dedup != "true" {
		t.Errorf("repeat: %+v, want the event %s again", a, first.eventID)
	}
	if a := post("", "d2"); a.status != http.StatusForbidden || a.code != "ADDRESS_NOT_ALLOWED" {
		t.Errorf("from the proxy itself: %+v", a)
	}
	if a := post("192.0.2.7, 198.51.100.1", "d2"); a.status != http.StatusForbidden {
		t.Errorf("client outside allow_ips behind a forged entry: %+v", a)
	}

	// A clean restart keeps the window.
	if err := proc.End(t, syscall.SIGTERM); err != nil {
		t.Fatalf("satellite exit: %v\n%s", err, proc.Logs.String())
	}
	base = start().Base
	if a := post("192.0.2.7", "d1"); a.status != http.StatusOK || a.eventID != first.eventID || a.dedup != "true" {
		t.Errorf("repeat after the restart: %+v, want the event %s again", a, first.eventID)
	}
	// The rate limit (burst 3, a new process's bucket is full): three
	// calls pass, whatever they are, the fourth is 429.
	if a := post("192.0.2.8", "d3"); a.status != http.StatusOK {
		t.Errorf("d3: %+v", a)
	}
	post("192.0.2.8", "d4")
	if a := post("192.0.2.8", "d5"); a.status != http.StatusTooManyRequests || a.code != "RATE_LIMITED" || a.retryAfter != "100" {
		t.Errorf("over the limit: %+v, want 429 RATE_LIMITED with Retry-After 100", a)
	}

	// Kafka has one event per accepted delivery: d1, d3, d4 (each call
	// was answered once acknowledged by Kafka or spooled: poll, bounded).
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	n := broker.EndOffsets(t, "squall.events")[0]
	for ; n < 3 && time.Now().Before(deadline); n = broker.EndOffsets(t, "squall.events")[0] {
		<-tick.C
	}
	if n != 3 {
		t.Errorf("%d records in Kafka, want 3", n)
	}
}

// TestSatelliteGuardFlags: bad --trusted-proxies and --trusted-proxy-header
// values stop the satellite with a message naming them.
func TestSatelliteGuardFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := []string{"satellite", "--webhooks-dir", dir, "--kafka-brokers", "k:9092", "--spool-dir", filepath.Join(dir, "spool")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(base, "--trusted-proxies", "10.1.2.3/8"), `invalid argument "10.1.2.3/8" for "--trusted-proxies" flag: "10.1.2.3/8": host bits set (did you mean 10.0.0.0/8?)`},
		{append(base, "--trusted-proxies", "proxy.internal"), `"proxy.internal": not an IP address or CIDR prefix`},
		{append(base, "--trusted-proxy-header", "X-Real-IP"), `trusted proxy header "X-Real-IP": must be X-Forwarded-For or Forwarded`},
		{append(base, "--dedupe-max-entries", "0"), "dedupe_max_entries: 0 is less than 1"},
	} {
		code, out, errOut := runSquall(t, "", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
