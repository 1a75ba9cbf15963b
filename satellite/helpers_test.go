package satellite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/tlscerttest"
	"github.com/squallhq/squall/satellite/tlscert"
)

const topic = "squall.events"

// Webhook files of the tests.
const (
	// plainHook forwards the whole body; its tenant is the satellite's.
	plainHook = `{"id": "plain", "token": "tok-0123456789abc",
		"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}"}}}`
	// tenantHook has its own tenant and takes the type from the body.
	tenantHook = `{"id": "github", "token": "gh-tok", "tenant_id": "acme",
		"signature": {"header": "X-Hub-Signature-256", "secret": "s3cr3t", "prefix": "sha256="},
		"collector_config": {"event_type": "${kind}", "payload": {"ref": "${ref}", "n": "${n}"}}}`
)

// writeHooks writes webhook files into a new folder and returns it.
func writeHooks(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testConfig is a configuration for tests: loopback, short timeouts.
func testConfig(t testing.TB, brokerAddr, hooksDir, spoolDir string) Config {
	t.Helper()
	cfg := Default()
	cfg.Name = "sat-test"
	cfg.TenantID = "site-a"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 20 * time.Second
	cfg.AckTimeout = 500 * time.Millisecond
	cfg.RetryBackoffMin = 20 * time.Millisecond
	cfg.RetryBackoffMax = 200 * time.Millisecond
	cfg.HealthInterval = 200 * time.Millisecond
	cfg.Webhooks.Dir = hooksDir
	cfg.Webhooks.Debounce = 20 * time.Millisecond
	cfg.Kafka.Brokers = []string{brokerAddr}
	cfg.Kafka.DialTimeout = time.Second
	cfg.Kafka.WriteTimeout = 2 * time.Second
	if spoolDir == "" {
		spoolDir = t.TempDir()
	}
	cfg.Spool.Dir = spoolDir
	return cfg
}

// runner is a running Satellite.
type runner struct {
	*Satellite
	reg    *prometheus.Registry
	url    string
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// start runs a Satellite with cfg until stop or the end of the test.
func start(t testing.TB, cfg Config) *runner {
	t.Helper()
	reg := prometheus.NewRegistry()
	var logger *slog.Logger
	if os.Getenv("SQUALL_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(cfg, logger, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{Satellite: s, reg: reg, cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}}
	go func() { r.done <- s.Run(ctx) }()
	select {
	case <-s.Started():
	case err := <-r.done:
		t.Fatalf("satellite stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("satellite did not start")
	}
	r.url = "http://" + s.Addr()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// serveTLS has cfg serve HTTPS with a certificate of serial 2 signed by a
// new test CA, read from certFile and keyFile (which a test may rewrite to
// rotate it).
func serveTLS(t testing.TB, cfg *Config) (ca *tlscerttest.CA, certFile, keyFile string) {
	t.Helper()
	ca = tlscerttest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteLeaf(t, certFile, keyFile, 2)
	certs, err := tlscert.Load(certFile, keyFile, tlscert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = certs.TLSConfig()
	return ca, certFile, keyFile
}

// startTLS is start for a cfg that serves HTTPS (serveTLS): the runner
// calls it with a client that trusts ca.
func startTLS(t testing.TB, cfg Config, ca *tlscerttest.CA) *runner {
	t.Helper()
	r := start(t, cfg)
	r.url = "https://" + r.Addr()
	r.client = ca.Client(t)
	return r
}

// stop shuts the satellite down and checks that it stopped cleanly.
func (r *runner) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("satellite Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("satellite did not stop")
	}
	r.client.CloseIdleConnections()
}

// post calls a webhook; it returns the status and the event id or error code.
func (r *runner) post(t testing.TB, id, token, body string, header http.Header) (int, string) {
	t.Helper()
	status, idOrCode, err := postTo(r.client, r.url, id, token, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return status, idOrCode
}

func postTo(client *http.Client, base, id, token, body string, header http.Header) (int, string, error) {
	req, err := http.NewRequest("POST", base+"/engine/webhook/event/"+id+"?token="+token, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var ans struct {
		EventID string `json:"event_id"`
		Code    string `json:"code"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return resp.StatusCode, "", fmt.Errorf("answer %q: %w", raw, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ans.EventID, nil
	}
	return resp.StatusCode, ans.Code, nil
}

// get fetches an ops endpoint.
func (r *runner) get(t testing.TB, path string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := r.client.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// status reads /readyz.
func (r *runner) readyz(t testing.TB) (int, Status) {
	t.Helper()
	code, _, raw := r.get(t, "/readyz")
	var st Status
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("/readyz %s: %v", raw, err)
	}
	return code, st
}

// eventPayload decodes a record value's payload.all (plainHook).
func eventPayload(t testing.TB, rec kafkatest.Record) map[string]any {
	t.Helper()
	var ev struct {
		Payload struct {
			All map[string]any `json:"all"`
		} `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Value))
	dec.UseNumber()
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("record value %s: %v", rec.Value, err)
	}
	return ev.Payload.All
}
