package satellite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/satellite/intake"
)

// kcatPath returns Debian's kcat. CI installs it (.ci/run): there, a missing
// kcat fails the test; elsewhere it skips it.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if _, ci := os.LookupEnv("CI"); ci {
			t.Fatalf("kcat is required in CI (apt-get install kcat): %v", err)
		}
		t.Skip("kcat not installed (apt-get install kcat); CI runs this test")
	}
	return path
}

// TestSatellite_KcatInterop reads what the satellite wrote with kcat
// (librdkafka), a Kafka client independent of kafka-go and franz-go, for
// every compression codec: every answered event once or more, and nothing
// else. Delivery is at least once: a write Kafka acknowledges after the ack
// timeout (a loaded machine under -race) is also spooled and sent again, and
// kcat then reads its event twice, the same both times.
func TestSatellite_KcatInterop(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	b := kafkatest.Start(t, kafkatest.Config{Partitions: 3, Topics: []string{
		"kcat-none", "kcat-gzip", "kcat-snappy", "kcat-lz4", "kcat-zstd"}})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook})
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, b.Addr, hooks, "")
			cfg.Kafka.Topic = "kcat-" + codec
			cfg.Kafka.Compression = codec
			s := start(t, cfg)
			const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			sent := map[string]int{}
			for i := range 10 {
				status, id := s.post(t, "plain", "tok-0123456789abc", fmt.Sprintf(`{"i": %d, "text": "ünïcode \"quoted\""}`, i),
					map[string][]string{"Traceparent": {traceparent}})
				if status != 200 {
					t.Fatalf("%d %s", status, id)
				}
				sent[id] = i
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kcat, "-C", "-b", b.Addr, "-t", cfg.Kafka.Topic,
				"-o", "beginning", "-e", "-q", "-J", "-X", "broker.address.family=v4")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kcat: %v\n%s", err, stderr.String())
			}
			read := map[string]int{} // times read, by event id
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m struct {
					Partition int      `json:"partition"`
					TSType    string   `json:"tstype"`
					TS        int64    `json:"ts"`
					Headers   []string `json:"headers"` // name, value, name, value…
					Key       string   `json:"key"`
					Payload   string   `json:"payload"`
				}
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("kcat output %s: %v", sc.Bytes(), err)
				}
				headers := map[string]string{}
				var names []string
				for i := 0; i+1 < len(m.Headers); i += 2 {
					headers[m.Headers[i]] = m.Headers[i+1]
					names = append(names, m.Headers[i])
				}
				if got := strings.Join(names, ","); got != "squall-event-id,traceparent,squall-webhook,squall-source" {
					t.Errorf("headers %s", got)
				}
				id := headers[intake.HeaderEventID]
				i, ok := sent[id]
				if !ok {
					t.Fatalf("kcat read an event no call was answered with %q: %s", id, sc.Bytes())
				}
				var ev struct {
					Type      string `json:"type"`
					CreatedMs int64  `json:"created_ms"`
					Metadata  struct {
						TenantID string `json:"tenant_id"`
					} `json:"metadata"`
					Payload struct {
						All struct {
							I    int    `json:"i"`
							Text string `json:"text"`
						} `json:"all"`
					} `json:"payload"`
				}
				if err := json.Unmarshal([]byte(m.Payload), &ev); err != nil {
					t.Fatalf("value %q: %v", m.Payload, err)
				}
				if ev.Type != "webhook" || ev.Metadata.TenantID != "site-a" || ev.Payload.All.I != i || ev.Payload.All.Text != `ünïcode "quoted"` {
					t.Errorf("event %s: %+v", id, ev)
				}
				if m.Key != "site-a" || m.TSType != "create" || m.TS != ev.CreatedMs {
					t.Errorf("event %s: key %q, timestamp %s %d (created_ms %d)", id, m.Key, m.TSType, m.TS, ev.CreatedMs)
				}
				if headers[intake.HeaderTraceparent] != traceparent || headers[intake.HeaderWebhook] != "plain" ||
					headers[intake.HeaderSource] != "sat-test" {
					t.Errorf("event %s: headers %v", id, headers)
				}
				read[id]++
			}
			for id, n := range read {
				if n > 1 {
					t.Logf("event %s read %d times (a write acknowledged after the ack timeout)", id, n)
				}
				delete(sent, id)
			}
			if len(sent) != 0 {
				t.Fatalf("kcat read %d events; missing %v (stderr %s)", len(read), sent, strings.TrimSpace(stderr.String()))
			}
		})
	}
}
