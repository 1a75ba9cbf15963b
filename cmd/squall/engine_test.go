package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

func TestEngineFlags(t *testing.T) {
	t.Parallel()
	tokenFile := filetest.Write(t, t.TempDir(), "token", "tok\n")
	base := []string{"engine", "--master", "http://m:8080", "--token-file", tokenFile, "--kafka-brokers", "k:9092"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"engine"}, "--master (or SQUALL_MASTER) is required"},
		{[]string{"engine", "--master", "http://m:8080"}, "--token-file (or SQUALL_TOKEN_FILE) is required"},
		{[]string{"engine", "--master", "http://m:8080", "--token-file", tokenFile}, "--kafka-brokers (or SQUALL_KAFKA_BROKERS) is required"},
		{[]string{"engine", "--master", "http://m:8080", "--token-file", "/nonexistent", "--kafka-brokers", "k:9092"}, "--token-file"},
		{append(base, "--workers", "0"), "workers"},
		{append(base, "--master", "ftp://m"), "http or https"},
		{append(base, "--dlq-topic", "squall.events"), "dlq_topic"},
		{append(base, "--actions-config", "/nonexistent.json"), "nonexistent.json"},
		{append(base, "--log-level", "loud"), "--log-level"},
		{append(base, "--kafka-session-timeout", "6s", "--kafka-heartbeat-interval", "6s"), "heartbeat interval: 6s must be shorter than the session timeout 6s"},
		{append(base, "--kafka-session-timeout", "-1s"), "session timeout: -1s must be positive"},
		{append(base, "--kafka-rebalance-timeout", "-2s"), "rebalance timeout: -2s must be positive"},
		{append(base, "--kafka-start-offset", "newest"), `start offset: "newest" is neither "earliest" nor "latest"`},
	} {
		code, out, errOut := runSquall(t, "", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, out, _ := runSquall(t, "", "engine", "--help")
	if code != 0 || !strings.Contains(out, "[SQUALL_KAFKA_BROKERS]") || !strings.Contains(out, "--dlq-topic") || !strings.Contains(out, "--kafka-session-timeout duration") {
		t.Errorf("help: %d %s", code, out)
	}
}

// TestEngineBinary runs the real processes: squall master (a tree imported
// from Tornado's rules.d and deployed through the API) and squall engine,
// with an in-process Kafka broker. Events of the topic are archived by the
// tree's archive_all rule; an event for the elasticsearch rule (the second
// action of its event), whose executor is not built in, goes to the
// dead-letter topic.
func TestEngineBinary(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	draft := strings.TrimSpace(mustRun(t, "import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--master", base, "--token-file", tokenFile))
	apitest.Deploy(t, base, token, draft, "")

	addr := kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: 2}).Addr
	actions, archive := archiveActions(t, dir, "")

	p := startEngine(t, []string{"SQUALL_GROUP=engines-test"}, "--master", base, "--token-file", tokenFile,
		"--kafka-brokers", addr, "--actions-config", actions, "--name", "engine-test", "--site", "par", "--fleet-interval", "100ms")
	ops, logText := p.Addr, p.Logs
	var recs []*kgo.Record
	for i := range 20 {
		typ := "webhook"
		if i == 10 {
			typ = "index"
		}
		recs = append(recs, &kgo.Record{
			Key:   []byte("acme"),
			Value: fmt.Appendf(nil, `{"type": %q, "created_ms": 1700000000000, "metadata": {"tenant_id": "acme"}, "payload": {"n": %d, "data": {"k": "v"}}}`, typ, i),
			Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: fmt.Appendf(nil, "019a0000-0000-7000-8000-%012d", i)},
				{Key: "squall-source", Value: []byte("test")}},
		})
	}
	produce(t, addr, recs...)

	// A separate process gives no signal to wait on: poll, bounded.
	archived := func() int {
		b, _ := os.ReadFile(filepath.Join(archive, "one.log"))
		return strings.Count(string(b), "\n")
	}
	if !polltest.Until(t.Context(), 30*time.Second, func() bool { return archived() == 20 }) {
		t.Fatalf("archive has %d lines, want 20:\n%s", archived(), logText.String())
	}
	resp, err := calltest.Client().Get("http://" + ops + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Ready     bool   `json:"ready"`
		TreeIndex uint64 `json:"tree_index"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !st.Ready || st.TreeIndex == 0 {
		t.Errorf("/readyz %d %+v", resp.StatusCode, st)
	}

	// The engine reports to the master's fleet list: ready, with the lag
	// of its partitions (0 once every event is processed).
	fleetDeadline := time.Now().Add(30 * time.Second)
	for {
		var list struct {
			Members []struct {
				ID          string `json:"id"`
				Role        string `json:"role"`
				Site        string `json:"site"`
				Version     string `json:"version"`
				Ready       bool   `json:"ready"`
				ConsumerLag *int64 `json:"consumer_lag"`
			} `json:"members"`
		}
		code, body := apitest.Call(t.Context(), http.MethodGet, base+"/squall/v1/fleet", strings.TrimSpace(string(token)), nil, "")
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
			t.Fatalf("fleet: %d %s", code, body)
		}
		found := false
		for _, m := range list.Members {
			if m.Role == "engine" && m.ID == "engine-test" && m.Site == "par" && strings.HasPrefix(m.Version, "squall ") &&
				m.Ready && m.ConsumerLag != nil && *m.ConsumerLag == 0 {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(fleetDeadline) {
			t.Fatalf("the engine is not in the fleet list, ready with lag 0: %s\n%s", body, logText.String())
		}
		pause(t)
	}

	// The elasticsearch event is in the dead-letter topic.
	dead := firstDeadLetter(t, addr, 30*time.Second, logText)
	headers := map[string]string{}
	for _, h := range dead.Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["squall-error-actions"] != "1:elasticsearch" || !strings.Contains(headers["squall-error"], "no executor") ||
		headers["squall-event-id"] != "019a0000-0000-7000-8000-000000000010" {
		t.Errorf("dead letter headers %v", headers)
	}

	if err := p.End(t, syscall.SIGTERM); err != nil {
		t.Errorf("squall engine: %v\n%s", err, logText.String())
	}
	if !strings.Contains(logText.String(), `"msg":"consumer stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", logText.String())
	}
}
