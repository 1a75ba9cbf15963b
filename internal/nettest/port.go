package nettest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
)

// FixedPort returns a loopback address whose port is free now and lies
// below the ephemeral range: a process that listens on it keeps it across
// its restarts (its clients know only it), and no connection gets it as
// its local port while the process is down.
func FixedPort(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &low)
	}
	const from = 10000
	for range 100 {
		port := from + rand.IntN(max(low-from, 1000))
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return addr
	}
	t.Fatal("no free loopback port found below the ephemeral range")
	return ""
}
