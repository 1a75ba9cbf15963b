package findings_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/squallhq/squall/internal/benchtest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/findings"
)

// BenchmarkRequestIDs measures what request ids (master.RequestIDs: an id
// per write, its digest and body digest on the leader, a lookup and a
// record in the state machine's table) cost the findings API, side by
// side with the same mount without them: 16 clients PATCHing findings,
// and 64 inserting (which, declared idempotent as the master mounts them,
// get no session), through the leader of a 3-node cluster with fsync.
// Each variant runs its own cluster; with -count the variants alternate.
func BenchmarkRequestIDs(b *testing.B) {
	for _, ids := range []bool{false, true} {
		opts := []master.MountOption{master.IdempotentMethods(http.MethodPut)}
		if ids {
			opts = append(opts, master.RequestIDs())
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		defer client.CloseIdleConnections()
		put := func(b *testing.B, base, token, body string) (string, error) {
			ans, err := sendJSON(b.Context(), client, http.MethodPut, base+findings.Prefix+"findings/credentials", token, body, http.StatusCreated)
			if err != nil {
				return "", fmt.Errorf("insert: %w", err)
			}
			var out struct{ UID string }
			if err := json.Unmarshal(ans, &out); err != nil {
				return "", fmt.Errorf("insert: %w", err)
			}
			return out.UID, nil
		}
		b.Run(fmt.Sprintf("op=patch/ids=%v", ids), func(b *testing.B) {
			base, token := benchCluster(b, opts...)
			const clients, findingsN = 16, 64
			uids := make([]string, findingsN)
			for i := range uids {
				uid, err := put(b, base, token, fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "bench", "resource_url": "https://example.com/login", "username": "p%d", "password": "pw"}`, i))
				if err != nil {
					b.Fatal(err)
				}
				uids[i] = uid
			}
			benchOps(b, clients, "patches/s", "cpu-us/patch", func() (func(i int64) error, func(), error) {
				return func(i int64) error {
					_, err := sendJSON(b.Context(), client, http.MethodPatch, base+findings.Prefix+"finding/"+uids[i%findingsN],
						token, fmt.Sprintf(`{"ticket": "T-%d"}`, i), http.StatusOK)
					return err
				}, func() {}, nil
			})
		})
		b.Run(fmt.Sprintf("op=insert/ids=%v", ids), func(b *testing.B) {
			base, token := benchCluster(b, opts...)
			benchOps(b, 64, "inserts/s", "cpu-us/insert", func() (func(i int64) error, func(), error) {
				return func(i int64) error {
					_, err := put(b, base, token, fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "bench", "resource_url": "https://example.com/login",
						"username": "user%d@example.com", "hash": "%064x", "hash_algorithm": "SHA-256"}`, i, i))
					return err
				}, func() {}, nil
			})
		})
	}
}

// benchOps runs b.N operations from clients goroutines and reports
// throughput (rate), latency and process CPU per operation (cpu).
func benchOps(b *testing.B, clients int, rate, cpuName string, newClient func() (func(i int64) error, func(), error)) {
	ops := make([]func(int64) error, clients)
	for k := range ops {
		op, closeFn, err := newClient()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(closeFn)
		ops[k] = op
	}
	r := benchtest.Run(b, clients, func(w int, i int64) error { return ops[w](i) })
	r.Report(b, rate)
	r.ReportCPU(b, cpuName)
}
