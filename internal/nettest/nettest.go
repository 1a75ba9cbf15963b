// Package nettest holds network peers that misbehave, for tests of how the
// roles cope with them, and loopback addresses for the processes of a test.
package nettest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentListener accepts TCP connections on the loopback interface and
// reads them without ever answering: a port that is open but speaks no
// protocol. It returns its address and stops, connections closed, when
// the test ends.
func SilentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
