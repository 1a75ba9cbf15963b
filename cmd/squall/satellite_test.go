package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/tlscerttest"
)

// TestSatelliteBinary runs squall satellite against an in-process Kafka
// broker: a webhook call is answered with its event id and the event is in
// the topic with its key and headers.
func TestSatelliteBinary(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	dir := t.TempDir()
	hooks := webhookDir(t, dir)
	base := startSatellite(t, []string{"SQUALL_WEBHOOKS_DIR=" + hooks}, "--name", "sat1",
		"--kafka-brokers", broker.Addr, "--spool-dir", filepath.Join(dir, "spool")).Base
	resp, err := calltest.Client().Post(base+"/engine/webhook/event/github?token=s3cret-0123456789ab", "application/json", strings.NewReader(`{"ref":"refs/heads/main"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		EventID string `json:"event_id"`
	}
	json.NewDecoder(resp.Body).Decode(&ack)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ack.EventID == "" {
		t.Fatalf("webhook: %d %+v", resp.StatusCode, ack)
	}
	resp, err = calltest.Client().Post(base+"/engine/webhook/event/github?token=wrong", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}

	r := oneRecord(t, broker.Addr)
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	var ev struct {
		Type     string         `json:"type"`
		Metadata map[string]any `json:"metadata"`
		Payload  map[string]any `json:"payload"`
	}
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "acme" || headers["squall-event-id"] != ack.EventID || headers["squall-source"] != "sat1" || headers["squall-webhook"] != "github" ||
		ev.Type != "push" || ev.Metadata["tenant_id"] != "acme" || ev.Payload["ref"] != "refs/heads/main" {
		t.Fatalf("record key %q headers %v value %s", r.Key, headers, r.Value)
	}
}

func startBroker(t *testing.T) *kafkatest.Broker {
	t.Helper()
	return kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events"}, Partitions: 1})
}

// webhookDir writes a folder with the webhook "github" (token s3cret-0123456789ab,
// tenant acme) under dir.
func webhookDir(t *testing.T, dir string) string {
	t.Helper()
	hooks := filepath.Join(dir, "webhooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := `{"id": "github", "token": "s3cret-0123456789ab", "tenant_id": "acme",
	  "collector_config": {"event_type": "push", "payload": {"ref": "${ref}", "all": "${@}"}}}`
	filetest.Write(t, hooks, "github.json", hook)
	return hooks
}

// oneRecord reads the one record of squall.events.
func oneRecord(t *testing.T, broker string) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("squall.events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	return recs[0]
}

// TestMasterIntake: a master node started with --webhooks-dir serves the
// webhook intake and forwards to Kafka like a satellite.
func TestMasterIntake(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	dir := t.TempDir()
	hooks := webhookDir(t, dir)
	base := startMaster(t, "--allow-unsigned-tokens", "--webhooks-dir", hooks, "--kafka-brokers", broker.Addr, "--spool-dir", filepath.Join(dir, "spool"))
	resp, err := calltest.Client().Post(base+"/engine/webhook/event/github?token=s3cret-0123456789ab", "application/json", strings.NewReader(`{"ref":"refs/heads/dev"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook on the master: %d", resp.StatusCode)
	}
	r := oneRecord(t, broker.Addr)
	if string(r.Key) != "acme" || !strings.Contains(string(r.Value), "refs/heads/dev") {
		t.Fatalf("record %q %s", r.Key, r.Value)
	}
}

func TestSatelliteFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filetest.Write(t, dir, "garbage.pem", "not PEM")
	base := []string{"satellite", "--webhooks-dir", dir, "--kafka-brokers", "k:9092", "--spool-dir", filepath.Join(dir, "spool")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"satellite", "--tls-cert-file", "tls.crt"}, "--tls-cert-file and --tls-key-file (or SQUALL_TLS_CERT_FILE and SQUALL_TLS_KEY_FILE) go together: set both or neither"},
		{append(base, "--tls-key-file", "tls.key"), "go together: set both or neither"},
		{append(base, "--tls-cert-file", filepath.Join(dir, "nope.crt"), "--tls-key-file", garbage), "nope.crt: no such file"},
		{append(base, "--tls-cert-file", garbage, "--tls-key-file", garbage), "failed to find any PEM data"},
		{append(base, "--log-level", "loud"), "--log-level"},
		{append(base, "--master", "http://127.0.0.1:1"), "--master needs --master-token-file"},
		{append(base, "--master-token-file", garbage), "--master-token-file without --master"},
		{append(base, "--master", "http://127.0.0.1:1", "--master-token-file", filepath.Join(dir, "none")), "--master-token-file: open"},
		{append(base, "--master", "127.0.0.1:1", "--master-token-file", garbage), "want http(s)://host:port"},
		{append(base, "--master", "http://127.0.0.1:1", "--master-token-file", garbage, "--fleet-interval", "-1s"), "--fleet-interval must not be negative"},
	} {
		code, out, errOut := runSquall(t, "", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, out, _ := runSquall(t, "", "satellite", "--help")
	if code != 0 || !strings.Contains(out, "[SQUALL_TLS_CERT_FILE]") || !strings.Contains(out, "[SQUALL_TLS_KEY_FILE]") {
		t.Errorf("help: %d %s", code, out)
	}
}

// TestSatelliteBinaryTLS runs squall satellite with a certificate given by
// flag and its key by environment variable: a webhook call over HTTPS
// (HTTP/2, trusting the test CA) reaches Kafka.
func TestSatelliteBinaryTLS(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	dir := t.TempDir()
	hooks := webhookDir(t, dir)
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteLeaf(t, certFile, keyFile, 2)
	p := startSatellite(t, []string{"SQUALL_TLS_KEY_FILE=" + keyFile}, "--tls-cert-file", certFile,
		"--kafka-brokers", broker.Addr, "--spool-dir", filepath.Join(dir, "spool"), "--webhooks-dir", hooks)
	if !strings.Contains(p.Logs.String(), `"tls":true`) {
		t.Errorf("the start line does not say TLS is on:\n%s", p.Logs.String())
	}
	resp, err := ca.Client(t).Post("https://"+p.Addr+"/engine/webhook/event/github?token=s3cret-0123456789ab", "application/json", strings.NewReader(`{"ref":"refs/heads/tls"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/1.1" { // the satellite offers no HTTP/2
		t.Fatalf("webhook over HTTPS: %s %d", resp.Proto, resp.StatusCode)
	}
	if r := oneRecord(t, broker.Addr); !strings.Contains(string(r.Value), "refs/heads/tls") {
		t.Fatalf("record %s", r.Value)
	}
	if logs := p.Logs.String(); strings.Contains(logs, "PRIVATE KEY") || strings.Contains(logs, "BEGIN") {
		t.Errorf("the logs show file contents:\n%s", logs)
	}
}
