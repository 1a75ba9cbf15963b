package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/joinmute"
)

// TestNestedConditions runs the shape every real tree has, a rule whose
// WHERE is an AND holding an OR and a NOT (or another AND), through the
// real binary: three masters accept it (import and deploy), two engines
// install it and stay up, and exactly the events it matches produce
// their actions; a test event against a draft holding it is answered, and
// `squall process` runs it. (The compiler once panicked on it and every
// engine crash-looped: decision 51.)
func TestNestedConditions(t *testing.T) {
	if testing.Short() {
		t.Skip("three masters and two engines: skipped in -short mode")
	}
	t.Parallel()
	dir := t.TempDir()
	keyFile, admin, engineToken := clusterTokens(t, dir, "nested")
	rx := newActionReceiver(t)

	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, e2eTopic, e2eDLQTopic),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return joinmute.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	brokerAddr := broker.ListenAddrs()[0]

	masters := startMasterCluster(t, dir, admin, "--token-hmac-key-file", keyFile)
	m1, m2, m3 := masters[0], masters[1], masters[2]

	// A first tree, then the engines.
	first := bytes.ReplaceAll(mustRead(t, "testdata/e2e/tree.json"), []byte("RECEIVER_URL"), []byte(rx.url))
	apitest.DeployTree(t, m2.Base, admin, first)
	actionsConfig := filepath.Join(dir, "actions.json")
	writeFile(t, actionsConfig, `{"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]}}`)
	var engines []*proctest.Proc
	for i := 1; i <= 2; i++ {
		engines = append(engines, startE2E(t, fmt.Sprintf("e%d", i),
			"engine", "--master", strings.Join([]string{m1.Base, m2.Base, m3.Base}, ","), "--token-file", engineToken,
			"--kafka-brokers", brokerAddr, "--group", "nested", "--http", "127.0.0.1:0", "--actions-config", actionsConfig,
			"--kafka-session-timeout", "6s", "--kafka-heartbeat-interval", "1s", "--kafka-rebalance-timeout", "6s"))
	}
	all := append(slices.Clone(masters), engines...)
	proctest.Wait(t, e2eStartupTimeout, "both engines ready", all, func() bool {
		a, b := engineStatus(engines[0]), engineStatus(engines[1])
		return a.Ready && b.Ready && len(a.Partitions)+len(b.Partitions) == 2
	})
	before := engineStatus(engines[0]).TreeIndex

	// The nested tree: accepted by import and deploy, through a follower.
	nested := bytes.ReplaceAll(mustRead(t, "testdata/nested/tree.json"), []byte("RECEIVER_URL"), []byte(rx.url))
	apitest.DeployTree(t, m3.Base, admin, nested)
	proctest.Wait(t, 30*time.Second, "both engines on the nested tree", all, func() bool {
		a, b := engineStatus(engines[0]), engineStatus(engines[1])
		return a.Ready && b.Ready && a.TreeIndex > before && a.TreeIndex == b.TreeIndex
	})

	events := []struct {
		id, typ, payload string
		want             []string // the ids the receiver gets
	}{
		{"n1", "a", `"host": "h"`, []string{"n1"}},
		{"n2", "b", `"flag": true, "host": "h"`, []string{"n2"}},
		{"n3", "a", `"host": "x"`, nil},
		{"n4", "b", `"host": "z"`, nil},
		{"n5", "b", `"host": "y"`, []string{"n5-r2"}},
		{"n6", "a", `"flag": true, "host": "y"`, []string{"n6"}},
	}
	var recs []*kgo.Record
	var want []string
	for i, ev := range events {
		recs = append(recs, &kgo.Record{Key: []byte("tenant-n"),
			Value:   fmt.Appendf(nil, `{"type": %q, "created_ms": 1, "metadata": {"tenant_id": "tenant-n"}, "payload": {"id": %q, %s}}`, ev.typ, ev.id, ev.payload),
			Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: fmt.Appendf(nil, "019a0000-0000-7000-8000-%012d", i)}}})
		want = append(want, ev.want...)
	}
	// A last event every rule lets through marks the end: events of one
	// key are processed in order.
	recs = append(recs, &kgo.Record{Key: []byte("tenant-n"),
		Value:   []byte(`{"type": "a", "created_ms": 1, "metadata": {"tenant_id": "tenant-n"}, "payload": {"id": "n-last", "host": "h"}}`),
		Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: []byte("019a0000-0000-7000-8000-999999999999")}}})
	produce(t, brokerAddr, recs...)
	proctest.Wait(t, 30*time.Second, "the last event's action", all, func() bool { return len(rx.missing([]string{"n-last"})) == 0 })
	if missing := rx.missing(want); len(missing) != 0 {
		t.Errorf("no action for %v", missing)
	}
	if _, distinct, _ := rx.counts(); distinct != len(want)+1 {
		t.Errorf("%d distinct actions, want %d (%v and n-last)", distinct, len(want)+1, want)
	}
	for _, e := range engines {
		if !e.Running() {
			t.Errorf("engine %s exited", e.Name)
		}
		if st := engineStatus(e); !st.Ready {
			t.Errorf("engine %s not ready: %+v", e.Name, st)
		}
	}

	// A test event against a draft holding the tree is answered.
	code, body := apitest.Call(t.Context(), http.MethodPost, m1.Base+"/api/v2_beta/config/drafts/all", admin, nil, "")
	var draft struct {
		ID string `json:"id"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &draft) != nil {
		t.Fatalf("create draft: %d %s", code, body)
	}
	code, body = apitest.Call(t.Context(), http.MethodPost, m1.Base+"/api/v2_beta/event/draft/all/"+draft.ID, admin,
		strings.NewReader(`{"event": {"type": "a", "created_ms": 1, "payload": {"host": "h", "id": "t1"}}, "process_type": "SkipActions"}`), "application/json")
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"status":"Matched"`)) {
		t.Errorf("test event on the draft: %d %s", code, body)
	}

	// squall process runs it.
	treeFile, eventFile := filepath.Join(dir, "tree.json"), filepath.Join(dir, "event.json")
	if err := os.WriteFile(treeFile, nested, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, eventFile, `{"type": "b", "created_ms": 1, "payload": {"flag": true, "host": "h", "id": "p1"}}`)
	if out := mustRun(t, "process", "--tree", treeFile, "--event", eventFile); !strings.Contains(out, `"status": "Matched"`) {
		t.Errorf("squall process: %s", out)
	}
}
