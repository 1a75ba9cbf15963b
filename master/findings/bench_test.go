package findings_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// BenchmarkInsertHTTP64 measures 64 concurrent clients inserting distinct
// credential findings over HTTP into the leader of a 3-node cluster with
// fsync, mounted OnLeaderWrite as the master mounts the API. Allocations
// and CPU are those of the whole process: clients and three nodes.
func BenchmarkInsertHTTP64(b *testing.B) {
	const clients = 64
	c := mastertest.TestCluster(b, 3,
		mastertest.WithConfig(func(_ int, cfg *master.Config) {
			opts := cfg.StoreOptions
			cfg.StoreOptions = func(sc *store.Config) {
				if opts != nil {
					opts(sc)
				}
				sc.NoSync = false
				// raft's default timeouts (heartbeat 1 s, lease 500 ms), as
				// deployed: the tests' short ones make a CPU-starved leader
				// step down in the middle of the run.
				sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = 0, 0, 0
			}
		}),
		mastertest.WithSetup(func(_ int, s *master.Server) {
			a := findings.New(findings.Default(), s.Store(), s.Verifier(), nil)
			if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeaderWrite); err != nil {
				b.Fatal(err)
			}
		}))
	url := c.URL(c.Leader()) + "/intel/api/sdk/v0/findings/credentials"
	token := "Bearer " + c.Token(auth.Claims{User: "bench", Tenant: "bench"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	b.Cleanup(client.CloseIdleConnections)
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "bench", "resource_url": "https://example.com/login",
					"username": "user%d@example.com", "hash": "%064x", "hash_algorithm": "SHA-256"}`, i, i)
				t0 := time.Now()
				err := put(b, client, url, token, body)
				if err != nil {
					err = fmt.Errorf("insert %d: %w", i, err)
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "inserts/s")
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	// Clients, HTTP and all three nodes, per insert.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/insert")
}

// cpuTime returns the CPU time (user and system) this process has used:
// on a shared machine, CPU per operation is steadier than wall-clock
// throughput.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func put(b *testing.B, client *http.Client, url, token, body string) error {
	req, err := http.NewRequestWithContext(b.Context(), "PUT", url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%d %s", resp.StatusCode, msg)
	}
	return nil
}
