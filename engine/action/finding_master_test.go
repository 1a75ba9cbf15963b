package action_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
)

// findingCluster starts a 3-node master cluster with the findings API
// mounted on the leader as master/node does.
func findingCluster(t *testing.T) *mastertest.Cluster {
	t.Helper()
	return mastertest.TestCluster(t, 3, mastertest.WithSetup(func(_ int, s *master.Server) {
		a := findings.New(findings.Default(), s.Store(), s.Verifier(), nil)
		if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeader); err != nil {
			t.Fatal(err)
		}
	}))
}

// findingRegistry returns a registry whose finding executor talks to every
// node of c with token.
func findingRegistry(t *testing.T, c *mastertest.Cluster, token string) *action.Registry {
	t.Helper()
	file := filetest.Write(t, t.TempDir(), "token", token+"\n")
	cfg := action.Default()
	cfg.Retry.MaxAttempts, cfg.Retry.BaseDelay, cfg.Retry.MaxDelay = 3, action.Duration(10*time.Millisecond), action.Duration(50*time.Millisecond)
	for i := range c.Len() {
		cfg.Finding.MasterURLs = append(cfg.Finding.MasterURLs, c.URL(i))
	}
	cfg.Finding.TokenFile = file
	r, err := action.NewRegistry(cfg, action.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestFinding_realMaster runs finding actions against a real master cluster
// and reads the findings back through the findings API.
func TestFinding_realMaster(t *testing.T) {
	t.Parallel()
	c := findingCluster(t)
	acme := c.Token(auth.FindingsClaims("leakmon", "acme", auth.FindingsRead, auth.FindingsWrite))
	r := findingRegistry(t, c, acme)

	tests := []struct {
		name     string
		payload  string
		wantErr  string // the API error code expected
		wantUser string // a finding of this username must be listed
	}{
		{name: "password finding", payload: `{"monitored_domain_id": 42, "tool_code": "leakmon",
			"resource_url": "https://paste.example/a1", "username": "alice@acme.example", "password": "hunter2"}`,
			wantUser: "alice@acme.example"},
		{name: "same finding again is a success", payload: `{"monitored_domain_id": 42, "tool_code": "leakmon",
			"resource_url": "https://paste.example/a1", "username": "alice@acme.example", "password": "hunter2"}`,
			wantUser: "alice@acme.example"},
		{name: "hash finding", payload: `{"monitored_domain_id": 42, "tool_code": "leakmon",
			"resource_url": "https://paste.example/b2", "username": "bob@acme.example",
			"hash": "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8", "hash_algorithm": "sha1"}`,
			wantUser: "bob@acme.example"},
		{name: "refused by the API", payload: `{"monitored_domain_id": 42, "username": "carol@acme.example", "password": "x"}`,
			wantErr: "MISSING_FIELD"},
	}
	for _, tt := range tests {
		var p map[string]any
		if err := json.Unmarshal([]byte(tt.payload), &p); err != nil {
			t.Fatal(err)
		}
		err := r.Run(t.Context(), tree.Action{ID: action.IDFinding, Payload: p, CreatedMs: 1})
		if tt.wantErr != "" {
			var fe *action.FindingError
			if !errors.As(err, &fe) || fe.Code != tt.wantErr || fe.StatusCode != http.StatusBadRequest || action.Retriable(err) {
				t.Errorf("%s: %v, want a permanent 400 %s", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}

	resp, body := c.Do(c.Leader(), http.MethodGet, "/intel/api/sdk/v0/findings/credential?limit=100", acme, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	var list struct {
		Total    int `json:"total"`
		Findings []struct {
			Username        string `json:"username"`
			PlainText       string `json:"plain_text"`
			Hash            string `json:"hash"`
			Resource        string `json:"resource"`
			MonitoredDomain struct {
				ID int `json:"id"`
			} `json:"monitored_domain"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Total != 2 || len(list.Findings) != 2 {
		t.Fatalf("%d findings listed (%s), want 2 (the duplicate deduplicated)", list.Total, body)
	}
	byUser := map[string]int{}
	for i, f := range list.Findings {
		byUser[f.Username] = i
	}
	a, okA := byUser["alice@acme.example"]
	b, okB := byUser["bob@acme.example"]
	if !okA || !okB {
		t.Fatalf("findings %s", body)
	}
	if f := list.Findings[a]; f.PlainText != "hunter2" || strings.TrimSuffix(f.Resource, "/") != "https://paste.example/a1" {
		t.Errorf("alice's finding %+v", f)
	}
	if f := list.Findings[b]; f.Hash != "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8" {
		t.Errorf("bob's finding %+v", f)
	}

	// Another tenant sees nothing.
	other := c.Token(auth.FindingsClaims("x", "other", auth.FindingsRead, auth.FindingsWrite))
	if resp, body := c.Do(c.Leader(), http.MethodGet, "/intel/api/sdk/v0/findings/credential", other, nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"total":0`) {
		t.Errorf("other tenant: %d %s", resp.StatusCode, body)
	}

	// A token without a tenant is refused, permanently, with the API's code.
	noTenant := findingRegistry(t, c, c.Token(auth.Claims{User: "leakmon"}))
	err := noTenant.Run(t.Context(), tree.Action{ID: action.IDFinding, Payload: map[string]any{
		"monitored_domain_id": 1, "tool_code": "t", "username": "u", "password": "p"}})
	var fe *action.FindingError
	if !errors.As(err, &fe) || fe.Code == "" || fe.StatusCode/100 != 4 || action.Retriable(err) {
		t.Errorf("token without tenant: %v, want a permanent 4xx with a code", err)
	}
}
