package robustness

import (
	"bufio"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"testing"
	"time"
)

// TestNetwork_Partition checks the proxies alone, with echo servers as
// nodes: a node's connection through a peer's proxy works, a partition
// cuts it and refuses new ones in both directions while the nodes of a
// group still talk, and healing restores it.
func TestNetwork_Partition(t *testing.T) {
	base := fmt.Sprintf("127.%d.%d.", 100+mrand.IntN(150), mrand.IntN(256))
	nw := NewNetwork(t)
	ips := make([]string, 3)
	proxies := make([]string, 3)
	for i := range ips {
		ips[i] = base + fmt.Sprint(i+1)
		ln, err := net.Listen("tcp", net.JoinHostPort(ips[i], "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go echo(ln)
		if proxies[i], err = nw.AddNode(i, ips[i], ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
	}
	// dial connects node from to node to's proxy and checks an echo.
	dial := func(from, to int) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ips[from])}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", proxies[to])
		if err != nil {
			return nil, err
		}
		if err := roundTrip(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	open, err := dial(0, 1)
	if err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	defer open.Close()

	nw.Partition([]int{0}, []int{1, 2})
	if err := roundTrip(open); err == nil {
		t.Fatal("an open connection survived the partition")
	}
	for _, p := range [][2]int{{0, 1}, {1, 0}, {0, 2}, {2, 0}} {
		if c, err := dial(p[0], p[1]); err == nil {
			c.Close()
			t.Fatalf("node %d reached node %d across the partition", p[0], p[1])
		}
	}
	if c, err := dial(1, 2); err != nil {
		t.Fatalf("nodes of one side: %v", err)
	} else {
		c.Close()
	}

	nw.Heal()
	if c, err := dial(0, 1); err != nil {
		t.Fatalf("after healing: %v", err)
	} else {
		c.Close()
	}
}

// echo answers every line of every connection of ln.
func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := c.Write([]byte(line)); err != nil {
					return
				}
			}
		}()
	}
}

// roundTrip sends a line on c and waits for its echo.
func roundTrip(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo %q", line)
	}
	return nil
}
