package mastertest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/squallhq/squall/master/mastertest"
)

// TestRefusedAddr: connections to the address are refused, and nothing
// else can listen on it while the test runs.
func TestRefusedAddr(t *testing.T) {
	t.Parallel()
	addr := mastertest.RefusedAddr(t)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s connected", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want connection refused", addr, err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("another listener took %s", addr)
	}
}
