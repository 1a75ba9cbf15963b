package intake

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the server's
// wrapped in a lazyConn.
func tcpPair(t *testing.T) (client net.Conn, server *lazyConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := Listener(ln, ServerConfig{}).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return client, c.(*lazyConn)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestListener_Deadlines: a read happens under the read deadline set last
// before it; one set while a read waits cuts that read; SetDeadline and a
// cleared deadline apply too.
func TestListener_Deadlines(t *testing.T) {
	t.Parallel()
	client, c := tcpPair(t)
	buf := make([]byte, 8)

	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(buf); !isTimeout(err) {
		t.Fatalf("read after a past deadline: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if _, err := client.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("read after the deadline was cleared: %d %v", n, err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	// Wait until the read waits, then set a deadline from here.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.mu.Lock()
		reading := c.reading
		c.mu.Unlock()
		if reading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read did not start within 10s")
		}
		time.Sleep(time.Millisecond) // polling a condition, with the deadline above
	}
	_ = c.SetReadDeadline(time.Now())
	select {
	case err := <-done:
		if !isTimeout(err) {
			t.Fatalf("waiting read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline set during a read did not cut it")
	}

	_ = c.SetDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(buf); !isTimeout(err) {
		t.Fatalf("read after SetDeadline: %v", err)
	}
	if _, err := c.Write(buf); !isTimeout(err) {
		t.Fatalf("write after SetDeadline: %v", err)
	}
}

// countingListener counts the read deadlines set on its connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) SetReadDeadline(t time.Time) error {
	c.n.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// TestListener_OneDeadlinePerRequest: calls that arrive whole on a
// kept-alive connection cost one read deadline each, where fasthttp sets
// three; and the bounds on the headers and the body of a later call on
// that connection hold.
func TestListener_OneDeadlinePerRequest(t *testing.T) {
	t.Parallel()
	sink := &recorder{}
	in, err := New(Config{Source: "sat-1"}, testDirectory(t), sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var deadlines atomic.Int64
	const d = 200 * time.Millisecond
	cfg := ServerConfig{HeaderTimeout: d, BodyTimeout: d, IdleTimeout: time.Minute}
	srv := in.NewServer(satelliteMux(in), cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(Listener(countingListener{ln, &deadlines}, cfg)) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	const call = "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	answer := func(br *bufio.Reader) int {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}

	conn, br := dial()
	const calls = 20
	for i := range calls {
		if _, err := io.WriteString(conn, call+"{}"); err != nil {
			t.Fatal(err)
		}
		if status := answer(br); status != http.StatusOK {
			t.Fatalf("call %d: %d", i, status)
		}
	}
	// Each call: the idle wait's deadline, applied by the read that waits
	// for it; and one when the connection opened.
	if n := deadlines.Load(); n > calls+2 {
		t.Errorf("%d read deadlines for %d calls", n, calls)
	}

	// After a call on the connection, slow headers and a slow body are
	// still cut in their own time, not the idle one.
	for name, rest := range map[string]string{
		"headers": "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\n",
		"body":    call + "{",
	} {
		conn, br := dial()
		if _, err := io.WriteString(conn, call+"{}"); err != nil {
			t.Fatal(err)
		}
		if status := answer(br); status != http.StatusOK {
			t.Fatalf("%s: first call %d", name, status)
		}
		if _, err := io.WriteString(conn, rest); err != nil {
			t.Fatal(err)
		}
		_, err := io.ReadAll(br) // the answer, if any, then the end
		if isTimeout(err) {
			t.Errorf("slow %s after a call: the connection stayed open", name)
		}
	}
}

// TestListener_Slack: a read deadline later than the connection's by less
// than the slack leaves it as it is; a later one, an earlier one, or none
// is applied.
func TestListener_Slack(t *testing.T) {
	t.Parallel()
	client, lc := tcpPair(t)
	var n atomic.Int64
	c := &lazyConn{Conn: countingConn{lc.Conn, &n}, slack: time.Second}
	buf := make([]byte, 8)
	read := func(deadline time.Time) int64 {
		t.Helper()
		_ = c.SetReadDeadline(deadline)
		if _, err := client.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		return n.Load()
	}
	base := time.Now().Add(time.Hour)
	for i, step := range []struct {
		deadline time.Time
		applied  int64
	}{
		{base, 1},
		{base.Add(500 * time.Millisecond), 1}, // within the slack
		{base.Add(2 * time.Second), 2},        // past it
		{base.Add(time.Second), 3},            // earlier
		{time.Time{}, 4},                      // none
		{base, 5},
	} {
		if got := read(step.deadline); got != step.applied {
			t.Fatalf("step %d: %d deadlines applied, want %d", i, got, step.applied)
		}
	}
}

// BenchmarkLazyConn: the read deadlines of one kept-alive call that
// arrives whole, as fasthttp sets them (the idle wait, the headers, the
// body), and a read under them (an empty one: no system call), on a
// lazyConn and on the connection itself.
func BenchmarkLazyConn(b *testing.B) {
	for _, lazy := range []bool{true, false} {
		b.Run(fmt.Sprintf("lazy=%t", lazy), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			c, err := Listener(ln, ServerConfig{}).Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if !lazy {
				c = c.(*lazyConn).Conn
			}
			var buf [1]byte
			b.ReportAllocs()
			for b.Loop() {
				_ = c.SetReadDeadline(time.Now().Add(DefaultIdleTimeout))
				if _, err := c.Read(buf[:0]); err != nil {
					b.Fatal(err)
				}
				_ = c.SetReadDeadline(time.Now().Add(DefaultHeaderTimeout))
				_ = c.SetReadDeadline(time.Now().Add(DefaultBodyTimeout))
			}
		})
	}
}
