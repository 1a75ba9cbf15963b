//go:build !unix

package mastertest

import (
	"net"
	"testing"
)

// RefusedAddr returns a loopback TCP address whose connections are
// refused. Without unix sockets it is a port freed by closing a
// listener, which a server started at the same time may take.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mastertest: listen: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
