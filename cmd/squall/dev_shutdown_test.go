package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/dev"
)

// devLoadTree is the example tree with a second action on its rule: a
// finding posted to the master, so that the engine's last events reach the
// master while it stops.
const devLoadTree = `{"version": "1.1",
 "Filter": {"name": "master",
  "filter": {"description": "", "active": true,
             "filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "master"}},
  "nodes": [
   {"Ruleset": {"name": "disks", "rules": [
    {"name": "archive_disk_alerts", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "disk_alert"}, "WITH": {}},
     "actions": [
      {"id": "archive", "payload": {"archive_type": "disk_alerts", "event": {"host": "${event.payload.host}", "event": "${event}"}}},
      {"id": "finding", "payload": {"monitored_domain_id": 7, "tool_code": "dev",
        "resource_url": "https://${event.payload.host}/login", "username": "admin@example.com",
        "password": "${event.payload.message}"}}]}
   ]}}
  ]}}`

// Load of TestDevStopUnderLoad: workers send webhooks one after the other,
// each at most devLoadCalls; SIGTERM goes once devLoadAcked were answered
// 200 in all.
const (
	devLoadWorkers = 8
	devLoadCalls   = 500
	devLoadAcked   = 100
)

// TestDevStopUnderLoad stops squall dev with SIGTERM while webhooks are in
// flight, their events on their way to the archive and the findings API.
// The shutdown logs no error (the intake answers the calls in progress,
// the engine drains before the master it posts findings to stops), and no
// event is lost: after a restart on the same data dir, every webhook
// answered 200 has its event archived.
func TestDevStopUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDev(t, dir)
	base := "http://" + d.addr
	data := filepath.Join(dir, "squall-data")
	admin := readTrimmed(t, filepath.Join(data, dev.AdminTokenFile))
	hook := base + "/engine/webhook/event/" + dev.WebhookID + "?token=" + readTrimmed(t, filepath.Join(data, dev.WebhookTokenFile))
	apitest.DeployTree(t, base, admin, []byte(devLoadTree))

	// The engine takes the new tree within a moment: send a probe until
	// its finding is there.
	post := func(host string) (int, string) {
		code, body := apitest.Call(t.Context(), http.MethodPost, hook, "",
			strings.NewReader(fmt.Sprintf(`{"host": %q, "message": "Disk 95%% full on /var"}`, host)), "application/json")
		var ack struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(body, &ack)
		return code, ack.EventID
	}
	postUntilFinding(t, d, base, admin, func() {
		if code, _ := post("probe"); code != http.StatusOK {
			t.Fatalf("probe webhook: %d", code)
		}
	})

	// The load: each worker stops at its first call not answered 200
	// (503 SHUTTING_DOWN, or no answer once dev stopped listening).
	var mu sync.Mutex
	acked := map[string]string{} // host → event id
	enough := make(chan struct{})
	var once sync.Once
	var workers sync.WaitGroup
	for w := range devLoadWorkers {
		workers.Go(func() {
			for i := range devLoadCalls {
				host := fmt.Sprintf("load-%d-%d", w, i)
				code, id := post(host)
				if code != http.StatusOK {
					return
				}
				mu.Lock()
				acked[host] = id
				if len(acked) >= devLoadAcked {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("fewer than %d webhooks answered 200 within 60s:\n%s", devLoadAcked, d.p.Logs.String())
	}
	d.stop(t, syscall.SIGTERM)
	workers.Wait()
	for _, line := range strings.Split(d.p.Logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("error logged while stopping under load: %s", line)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d webhooks answered 200 before squall dev stopped", len(acked))

	// Every acknowledged event is archived: before the stop, or by the
	// engine after the restart (its offsets are committed only once
	// processed).
	d = startDev(t, dir)
	archive := filepath.Join(data, "archive", dev.ArchiveFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := make(map[string]bool, len(acked))
		for host := range acked {
			missing[host] = true
		}
		b, _ := os.ReadFile(archive)
		for _, line := range strings.Split(string(b), "\n") {
			var a struct {
				Host string `json:"host"`
			}
			if json.Unmarshal([]byte(line), &a) == nil {
				delete(missing, a.Host)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged events not archived within 60s of the restart (such as %v):\n%s",
				len(missing), len(acked), firstKey(missing), d.p.Logs.String())
		}
		pause(t)
	}
	d.stop(t, syscall.SIGTERM)
}

// firstKey returns a key of m, for a message.
func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
