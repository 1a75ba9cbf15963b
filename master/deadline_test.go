package master_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/mastertest"
)

// TestServer_SlowBodies is the slow-body attack: many connections send a
// body one byte at a time, half to a route that reads the body (as an
// authenticated caller could), half without a token to the join endpoint.
// The body deadline cuts them all, /healthz answers all along, and a tree
// watch that waits longer than the body deadline is not cut.
//
// Not parallel: its connections load the machine, and the raft timeouts of
// the parallel tests' clusters are short.
func TestServer_SlowBodies(t *testing.T) {
	const bodyTimeout = 500 * time.Millisecond
	c := mastertest.TestCluster(t, 1, mountTestAPI(), mastertest.WithConfig(func(_ int, cfg *master.Config) {
		cfg.HTTPTimeouts = httpguard.Timeouts{Body: bodyTimeout}
	}))
	addr := strings.TrimPrefix(c.URL(0), "http://")

	const conns = 120
	paths := []string{"/api/v2_beta/test/echo/slow", "/squall/v1/cluster/join"}
	var wg sync.WaitGroup
	cut := make(chan time.Duration, conns)
	errs := make(chan error, conns)
	for i := range conns {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", paths[i%2])
			// Dribble until the server closes the connection: at most
			// 400 bytes, 20 s.
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, conn)
				close(closed)
			}()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for n := 0; n < 400; n++ {
				select {
				case <-closed:
					cut <- time.Since(start)
					return
				case <-tick.C:
					_, _ = conn.Write([]byte(" "))
				}
			}
			errs <- errors.New("connection still open after 400 bytes over 20 s")
		})
	}

	// A watch that outlives the body deadline several times over.
	tok := viewToken(c)
	r, _ := c.Get(0, "/squall/v1/tree/active", tok)
	idx := r.Header.Get(master.HeaderIndex)
	watch := make(chan int, 1)
	watchStart := time.Now()
	go func() {
		r, _ := c.Get(0, fmt.Sprintf("/squall/v1/tree/active?index=%s&wait=%s", idx, 4*bodyTimeout), tok)
		watch <- r.StatusCode
	}()

	// /healthz answers while the slow connections are open.
	for range 20 {
		r, _ := c.Get(0, "/healthz", "")
		if r.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %d", r.StatusCode)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(cut)
	var longest time.Duration
	for d := range cut {
		longest = max(longest, d)
	}
	t.Logf("%d slow connections cut, the last after %v", conns, longest)
	if st := <-watch; st != http.StatusOK || time.Since(watchStart) < 4*bodyTimeout {
		t.Fatalf("watch: status %d after %v, want 200 after its wait of %v", st, time.Since(watchStart), 4*bodyTimeout)
	}
}
