package intake

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener wraps ln, the listener of the server of [Intake.NewServer]
// with the same cfg, so that a read deadline set on one of its connections
// reaches the runtime only when a read needs it. fasthttp sets three per
// request on a kept-alive connection (the idle wait, the headers, the
// body), each a timer update in the runtime, but a request that arrives
// in one piece is read by one read, under the first: the other two were
// never used. Every read happens under the deadline set last before it,
// but for one thing: a deadline later than the one the connection has by
// less than 1/64 of the shortest of cfg's timeouts leaves it as it is, so
// that the idle waits of a busy connection, each a little later than the
// one before, do not update it each time. A wait may end that much early
// (at most 156 ms of the 2 min idle wait, with the defaults), never late.
// Wrap the TCP listener, under TLS (docs/decisions.md decision 45).
//
// The listener also bounds the connections open at once to cfg.MaxConns:
// see [connLimit].
func Listener(ln net.Listener, cfg ServerConfig) net.Listener {
	cfg = cfg.withDefaults()
	return lazyListener{ln, min(cfg.HeaderTimeout, cfg.BodyTimeout, cfg.IdleTimeout) / 64, newConnLimit(cfg)}
}

type lazyListener struct {
	net.Listener
	slack time.Duration
	limit *connLimit
}

func (l lazyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.limit.admit() {
			return &lazyConn{Conn: c, slack: l.slack, limit: l.limit}, nil
		}
		l.limit.refuse(c)
	}
}

// lazyConn holds the read deadline set last (pending) until a read, which
// applies it if the connection's (applied) differs, unless it is later by
// less than slack. A deadline set while a read waits, from another
// goroutine, applies at once, as it would on the connection itself.
type lazyConn struct {
	net.Conn
	limit            *connLimit
	closed           atomic.Bool
	slack            time.Duration
	mu               sync.Mutex
	pending, applied time.Time
	reading          bool
}

func (c *lazyConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if !c.pending.Equal(c.applied) && !c.closeEnough() {
		if err := c.Conn.SetReadDeadline(c.pending); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.applied = c.pending
	}
	c.reading = true
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.reading = false
	c.mu.Unlock()
	return n, err
}

// closeEnough reports whether the applied deadline may stay for the pending
// one: both set, and the pending one later by less than slack.
func (c *lazyConn) closeEnough() bool {
	if c.pending.IsZero() || c.applied.IsZero() {
		return false
	}
	d := c.pending.Sub(c.applied)
	return d > 0 && d < c.slack
}

func (c *lazyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.pending = t
	if !c.reading {
		c.mu.Unlock()
		return nil
	}
	c.applied = t
	err := c.Conn.SetReadDeadline(t)
	c.mu.Unlock()
	return err
}

func (c *lazyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.applied = t, t
	return c.Conn.SetDeadline(t)
}

// Close closes the connection and counts it out of the limit, once.
func (c *lazyConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.limit.release()
	}
	return c.Conn.Close()
}

var errNoCloseWrite = errors.New("connection cannot close its writing side alone")

// CloseWrite shuts the writing side of a TCP connection (see
// answerAndLinger).
func (c *lazyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}
