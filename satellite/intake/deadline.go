package intake

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Listener wraps ln, the listener of the server of [Intake.NewServer], so
// that a read deadline set on one of its connections reaches the runtime
// only when a read needs it. fasthttp sets three per request on a
// kept-alive connection (the idle wait, the headers, the body), each a
// timer update in the runtime, but a request that arrives in one piece
// is read by one read, under the first: the other two were never used.
// Every read still happens under the deadline set last before it, so the
// bounds on slow headers, slow bodies and idle connections are those the
// server sets. Wrap the TCP listener, under TLS.
func Listener(ln net.Listener) net.Listener { return lazyListener{ln} }

type lazyListener struct{ net.Listener }

func (l lazyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lazyConn{Conn: c}, nil
}

// lazyConn holds the read deadline set last (pending) until a read, which
// applies it if the connection's (applied) differs. A deadline set while a
// read waits, from another goroutine, applies at once, as it would on the
// connection itself.
type lazyConn struct {
	net.Conn
	mu               sync.Mutex
	pending, applied time.Time
	reading          bool
}

func (c *lazyConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if !c.pending.Equal(c.applied) {
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

func (c *lazyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = t
	if !c.reading {
		return nil
	}
	c.applied = t
	return c.Conn.SetReadDeadline(t)
}

func (c *lazyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.applied = t, t
	return c.Conn.SetDeadline(t)
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
