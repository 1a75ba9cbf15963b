package findings_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// BenchmarkInsertHTTP64 measures 64 concurrent clients inserting distinct
// credential findings over HTTP into the leader of a 3-node cluster with
// fsync, mounted as squall master mounts the API (OnLeaderWrite,
// IdempotentMethods(PUT), RequestIDs): inserts take the routing loop of
// retry-safe writes, as users' inserts do. Allocations and CPU are those
// of the whole process: clients and three nodes.
//
// The clients of "client=raw" write each request in one write on their
// own keep-alive connection and read the answer with http.ReadResponse,
// as load generators such as wrk do, so that on a small machine the load
// generator takes less of the CPU the three nodes share; those of
// "client=net-http" use an http.Client (a Transport with a read and a
// write goroutine per connection), about three times the client CPU.
func BenchmarkInsertHTTP64(b *testing.B) {
	const clients = 64
	base, token := benchCluster(b, master.IdempotentMethods(http.MethodPut), master.RequestIDs())
	// Each sub-benchmark inserts findings of its own, so that none is a
	// duplicate of an earlier run's.
	var run atomic.Int64
	body := func(r, i int64) string {
		return fmt.Sprintf(`{"monitored_domain_id": 1, "tool_code": "bench", "resource_url": "https://example.com/login",
					"username": "user%d-%d@example.com", "hash": "%064x", "hash_algorithm": "SHA-256"}`, r, i, i)
	}
	b.Run("client=raw", func(b *testing.B) {
		r := run.Add(1)
		u, err := url.Parse(base)
		if err != nil {
			b.Fatal(err)
		}
		head := "PUT " + findings.Prefix + "findings/credentials HTTP/1.1\r\nHost: " + u.Host +
			"\r\nAuthorization: " + token + "\r\nContent-Type: application/json\r\nContent-Length: "
		benchInserts(b, clients, func() (func(i int64) error, func(), error) {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				return nil, nil, err
			}
			br := bufio.NewReader(conn)
			var req []byte
			return func(i int64) error {
				body := body(r, i)
				req = append(strconv.AppendInt(append(req[:0], head...), int64(len(body)), 10), "\r\n\r\n"...)
				if _, err := conn.Write(append(req, body...)); err != nil {
					return err
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return err
				}
				_, err = checkStatus(resp, http.StatusCreated)
				return err
			}, func() { conn.Close() }, nil
		})
	})
	b.Run("client=net-http", func(b *testing.B) {
		r := run.Add(1)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		defer client.CloseIdleConnections()
		u := base + findings.Prefix + "findings/credentials"
		benchInserts(b, clients, func() (func(i int64) error, func(), error) {
			return func(i int64) error {
				_, err := sendJSON(b.Context(), client, http.MethodPut, u, token, body(r, i), http.StatusCreated)
				return err
			}, func() {}, nil
		})
	})
}

// benchCluster starts a 3-node cluster with fsync and raft's default
// timeouts (heartbeat 1 s, lease 500 ms), as deployed: the tests' short
// ones make a CPU-starved leader step down in the middle of a run. The
// findings API is mounted OnLeaderWrite with opts. It returns the
// leader's URL and the Authorization header of a token that reads and
// writes findings.
func benchCluster(b *testing.B, opts ...master.MountOption) (base, token string) {
	c := mastertest.TestCluster(b, 3,
		mastertest.WithStore(func(sc *store.Config) {
			sc.NoSync = false
			sc.HeartbeatTimeout, sc.ElectionTimeout, sc.LeaderLeaseTimeout = 0, 0, 0
		}),
		mastertest.WithSetup(func(_ int, s *master.Server) {
			a := findings.New(findings.Default(), s.Store(), s.Verifier(), nil)
			if err := s.Mount(findings.Prefix, a.Handler(), master.OnLeaderWrite, opts...); err != nil {
				b.Fatal(err)
			}
		}))
	return c.URL(c.Leader()), "Bearer " + c.Token(auth.FindingsClaims("bench", "bench", auth.FindingsRead, auth.FindingsWrite))
}

// benchInserts runs b.N inserts from clients goroutines, each with its own
// client from newClient, and reports throughput, latency and CPU (clients,
// HTTP and all three nodes, per insert).
func benchInserts(b *testing.B, clients int, newClient func() (insert func(i int64) error, close func(), err error)) {
	benchOps(b, clients, "inserts/s", "cpu-us/insert", newClient)
}

// sendJSON sends body, JSON, with the Authorization header token through
// client, and returns the answer's body if its status is want.
func sendJSON(ctx context.Context, client *http.Client, method, url, token, body string, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	return checkStatus(resp, want)
}

// checkStatus reads and closes resp's body, and returns it if resp's
// status is want.
func checkStatus(resp *http.Response, want int) ([]byte, error) {
	msg, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, msg)
	}
	return msg, nil
}
