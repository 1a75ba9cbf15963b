package kafkasource

import (
	"context"
	"net"
	"sync"
	"time"
)

// stallWatch keeps the Source's connections to the brokers and closes
// those on which a request waits for an answer longer than a limit, while
// the member is in a generation.
//
// kafka-go gives each request to the group coordinator a deadline, but
// the heartbeats share their connection with the commits and the
// partition watcher, and each request sets the deadline of the whole
// connection: a commit sent after the broker stopped answering pushes the
// deadline of the heartbeat waiting for its answer, and a member that
// commits steadily never notices a broker that froze (SIGSTOP, a network
// cut) and stays in its generation, ready, for as long as the freeze
// lasts. A broker that died closes its connections, and kafka-go notices
// at the next heartbeat; a silent one is closed here, which ends the
// generation the same way.
type stallWatch struct {
	mu    sync.Mutex
	conns map[*watchedConn]struct{}
}

// dial returns a DialFunc for kafka.Dialer that dials with d and keeps
// the connection.
func (w *stallWatch) dial(d dialFunc) dialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d(ctx, network, address)
		if err != nil {
			return nil, err
		}
		wc := &watchedConn{Conn: c, w: w, addr: address}
		w.mu.Lock()
		if w.conns == nil {
			w.conns = make(map[*watchedConn]struct{})
		}
		w.conns[wc] = struct{}{}
		w.mu.Unlock()
		return wc, nil
	}
}

// stalled closes the connections whose oldest unanswered request is older
// than limit, and returns their addresses and how long the longest
// waited.
func (w *stallWatch) closeStalled(now time.Time, limit time.Duration) (addrs []string, longest time.Duration) {
	w.mu.Lock()
	var stalled []*watchedConn
	for c := range w.conns {
		if d := c.waiting(now); d > limit {
			stalled = append(stalled, c)
			longest = max(longest, d)
		}
	}
	w.mu.Unlock()
	for _, c := range stalled {
		addrs = append(addrs, c.addr)
		_ = c.Close()
	}
	return addrs, longest
}

// watchedConn is a connection to a broker that knows since when a request
// waits for its answer: since the first write after the last read.
type watchedConn struct {
	net.Conn
	w    *stallWatch
	addr string

	mu      sync.Mutex
	pending time.Time // zero: no request waits
}

// waiting returns how long the oldest unanswered request has waited.
func (c *watchedConn) waiting(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending.IsZero() {
		return 0
	}
	return now.Sub(c.pending)
}

// Read implements net.Conn: any byte read is an answer.
func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.pending = time.Time{}
		c.mu.Unlock()
	}
	return n, err
}

// Write implements net.Conn.
func (c *watchedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.pending.IsZero() {
		c.pending = time.Now()
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// Close implements net.Conn.
func (c *watchedConn) Close() error {
	c.w.mu.Lock()
	delete(c.w.conns, c)
	c.w.mu.Unlock()
	return c.Conn.Close()
}
