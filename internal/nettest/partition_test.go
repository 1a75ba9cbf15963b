package nettest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestPartition(t *testing.T) {
	var p Partition
	ln, err := p.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() (net.Conn, error) { return p.Dial(ctx, &net.Dialer{}, ln.Addr().String()) }

	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	p.Cut()
	// Both ends of the open connection are closed.
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("write on a cut connection succeeded")
	}
	if _, err := server.Read(make([]byte, 1)); err == nil {
		t.Error("read on the accepted side of a cut connection succeeded")
	}
	if _, err := dial(); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("dial while cut: %v, want ErrPartitioned", err)
	}
	// A connection from outside the partition is accepted by the kernel,
	// then closed at once: the peer reads EOF, Accept returns nothing.
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from a connection accepted while cut: %v, want EOF", err)
	}
	raw.Close()

	p.Heal()
	c, err = dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server = <-accepted
	defer server.Close()
	if _, err := c.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(server, b); err != nil || b[0] != 'y' {
		t.Fatalf("after Heal: read %q, %v", b, err)
	}
}
