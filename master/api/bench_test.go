package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/squallhq/squall/config/configtest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// BenchmarkDraftRuleEditHTTP20k measures a rule edit of a 20,000-rule
// draft through the API of a 3-node cluster: the request goes to the
// leader and returns once the edit is committed (with fsync) and applied
// there.
func BenchmarkDraftRuleEditHTTP20k(b *testing.B) {
	c := mastertest.TestCluster(b, 3,
		mastertest.WithConfig(func(_ int, c *master.Config) { c.AllowUnsignedTokens = true }),
		mastertest.WithStore(func(sc *store.Config) {
			sc.NoSync = false // fsync, as in production
			// The production timeouts: replicating the 5 MB tree takes
			// longer than the tests' short ones.
			sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		}),
		mastertest.WithSetup(func(_ int, s *master.Server) {
			if err := s.Mount(Prefix, New(Config{}, s.Store(), s.Verifier(), nil, nil).Handler(), master.OnLeader); err != nil {
				b.Fatal(err)
			}
		}))
	leader := c.Leader()
	if _, err := c.Server(leader).Store().ReplaceActive(b.Context(), configtest.LargeTree(20_000)); err != nil {
		b.Fatal(err)
	}
	tok := token("bench", map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"edit"}}})
	client := &http.Client{}
	defer client.CloseIdleConnections()
	do := func(method, path, body string) []byte {
		req, err := http.NewRequestWithContext(b.Context(), method, c.URL(leader)+cfgPath+path, bytes.NewReader([]byte(body)))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, out := calltest.Do(b, client.Do, req)
		if resp.StatusCode != 200 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	var created DraftID
	if err := json.Unmarshal(do("POST", "/drafts/all", ""), &created); err != nil {
		b.Fatal(err)
	}
	url := "/draft/rule/details/all/" + created.ID + "/root,tenant7,rules/rule_500"
	var lat []time.Duration
	i := 0
	for b.Loop() {
		body := fmt.Sprintf(`{"name":"rule_500","description":"edit %d","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`, i)
		t0 := time.Now()
		do("PUT", url, body)
		lat = append(lat, time.Since(t0))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "max-ms")
}
