package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/master/auth"
)

// leakTree turns "leak" events into a credential finding and a Kafka
// record on testOut.
const leakTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "all", "rules": [
    {"name": "leaks", "description": "", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "leak"}, "WITH": {}},
     "actions": [
       {"id": "finding", "payload": {"monitored_domain_id": 42, "tool_code": "leakmon",
         "resource_url": "https://paste.example/${event.payload.id}", "username": "${event.payload.id}@acme.example",
         "password": "${event.payload.host}"}},
       {"id": "kafka", "payload": {"topic": "` + testOut + `", "key": "${event.metadata.tenant_id}",
         "value": {"id": "${event.payload.id}", "seq": "${event.payload.seq}"}}}]}
  ]}}]}}`

// TestService_FindingAndKafkaActions deploys a tree whose actions create
// findings through the master's findings API and produce to Kafka through
// the engine's writer (the real wiring: kfake broker, one-node master).
func TestService_FindingAndKafkaActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	acme := e.masters.Token(auth.FindingsClaims("engine-findings", "acme", auth.FindingsRead, auth.FindingsWrite))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "finding.token")
	writeFile(t, tokenFile, acme+"\n")
	e.actions = filepath.Join(dir, "actions.json")
	writeFile(t, e.actions, fmt.Sprintf(`{
		"retry": {"max_attempts": 3, "base_delay": "5ms", "max_delay": "20ms", "jitter": 0},
		"kafka": {"allowed_topics": [%q]},
		"finding": {"master_urls": [%q], "token_file": %q, "timeout": "5s"}}`,
		testOut, e.masters.URL(0), tokenFile))

	e.deployExport(leakTree)
	startReady(t, e.config())

	evs := orders(6, 2)
	for i := range evs {
		evs[i].typ = "leak"
	}
	e.produce(evs...)

	polltest.Wait(t, "6 records on "+testOut, processTimeout, func() bool { return len(e.broker.Records(t, testOut)) >= 6 })
	got := map[string]string{} // id -> key
	for _, rec := range e.broker.Records(t, testOut) {
		var v struct {
			ID  string `json:"id"`
			Seq any    `json:"seq"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("record %q: %v", rec.Value, err)
		}
		got[v.ID] = rec.Key
	}
	for _, ev := range evs {
		if got[ev.id] != ev.tenant {
			t.Errorf("event %s: record key %q, want %q", ev.id, got[ev.id], ev.tenant)
		}
	}

	type list struct {
		Total    int `json:"total"`
		Findings []struct {
			Username  string `json:"username"`
			PlainText string `json:"plain_text"`
		} `json:"findings"`
	}
	var l list
	polltest.Wait(t, "6 findings", processTimeout, func() bool {
		resp, body := e.masters.Do(0, http.MethodGet, "/intel/api/sdk/v0/findings/credential?limit=100", acme, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list findings: %d %s", resp.StatusCode, body)
		}
		l = list{}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		return l.Total >= 6
	})
	users := map[string]string{}
	for _, f := range l.Findings {
		users[f.Username] = f.PlainText
	}
	for _, ev := range evs {
		if pw, ok := users[ev.id+"@acme.example"]; !ok || pw != fmt.Sprintf("h-%d", ev.seq) {
			t.Errorf("event %s: finding %q %v", ev.id, pw, ok)
		}
	}
	if l.Total != 6 {
		t.Errorf("%d findings, want 6", l.Total)
	}
}
