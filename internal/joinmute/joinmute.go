// Package joinmute makes franz-go's in-process Kafka broker, kfake (the
// broker of the tests and of squall dev and squall broker), keep a
// consumer-group member whose JoinGroup waits for its answer as a Kafka
// broker does.
//
// Kafka reads nothing more of a connection while a request of it waits
// (the socket is muted), so it does not notice that a member closed its
// connection while its JoinGroup waited for the other members: it
// completes the join with the member in it, sends the answer nowhere and
// starts the member's session timer, and the member, silent, is removed
// one session timeout later (apache/kafka GroupCoordinator.onCompleteJoin
// schedules every member's heartbeat expiration; addMemberAndRebalance
// says so of the muted sockets). kfake reads on, sees the close, drops
// the answer and starts no session timer for the member: once the leader
// has synced, nothing removes it, and the partitions assigned to it have
// no live owner until the group rebalances for another reason
// (TestSource_MemberKilledWhileJoining in engine/kafkasource,
// docs/RELIABILITY.md).
//
// A listener wrapped by [Wrap] or made by [Listen] reads nothing more of
// a connection, once it has read a whole JoinGroup request, until the
// broker has written the answer to it; the broker then learns of a close
// as Kafka does, after the answer. The broker answers a connection's
// requests in order, one answer each: a client that sends acks=0 produce
// requests (which get no answer) on the connection of its JoinGroups is
// not supported. A TLS connection (kfake.TLS wraps the listener, so the
// requests pass here encrypted) is left alone: its first byte, a TLS
// handshake record's, would start a Kafka request of over 300 MB.
package joinmute

import (
	"encoding/binary"
	"net"
	"sync"
)

// joinGroupKey is the API key of JoinGroup requests.
const joinGroupKey = 11

// tlsHandshake is the first byte of a TLS handshake record.
const tlsHandshake = 0x16

// Listen listens on network and addr as net.Listen does, through Wrap:
// a kfake.ListenFn.
func Listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return Wrap(ln), nil
}

// Wrap returns ln, whose connections read nothing more after a JoinGroup
// request until it is answered.
func Wrap(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, closed: make(chan struct{})}, nil
}

// conn is a broker's connection to a client.
type conn struct {
	net.Conn

	mu       sync.Mutex
	head     []byte        // the first bytes of the request being read, up to its API key
	rest     int           // bytes of the request still to read after head
	join     bool          // the request is a JoinGroup
	requests int           // the requests read whole
	answers  int           // the answers whose writing started
	muted    chan struct{} // non-nil while a JoinGroup waits for its answer
	mutedBy  int           // the number of that JoinGroup among the requests
	closed   chan struct{} // closed with the connection
	once     sync.Once
	started  bool // a byte was read
	tls      bool // the connection is TLS: left alone
}

func (c *conn) Read(p []byte) (int, error) {
	c.wait()
	n, err := c.Conn.Read(p)
	c.read(p[:n])
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	answer := c.answering()
	n, err := c.Conn.Write(p)
	c.answered(answer)
	return n, err
}

func (c *conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// read follows the request frames (a 4-byte size, then the API key)
// through the bytes just read.
func (c *conn) read(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started && len(b) > 0 {
		c.started, c.tls = true, b[0] == tlsHandshake
	}
	for len(b) > 0 && !c.tls {
		if c.rest == 0 && len(c.head) < 6 {
			n := min(6-len(c.head), len(b))
			c.head = append(c.head, b[:n]...)
			b = b[n:]
			if len(c.head) < 6 {
				return
			}
			c.rest = max(int(binary.BigEndian.Uint32(c.head))-2, 0)
			c.join = int16(binary.BigEndian.Uint16(c.head[4:])) == joinGroupKey
		}
		n := min(c.rest, len(b))
		c.rest -= n
		b = b[n:]
		if c.rest == 0 {
			c.requests++
			if c.join && c.muted == nil {
				c.muted, c.mutedBy = make(chan struct{}), c.requests
			}
			c.head, c.join = c.head[:0], false
		}
	}
}

// wait returns once no JoinGroup waits for its answer, or the connection
// closed.
func (c *conn) wait() {
	c.mu.Lock()
	muted := c.muted
	c.mu.Unlock()
	if muted != nil {
		select {
		case <-muted:
		case <-c.closed:
		}
	}
}

// answering records that the broker starts writing an answer, and
// returns its number.
func (c *conn) answering() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers++
	return c.answers
}

// answered records that the broker wrote the answer-th answer: the
// connection is read again once the JoinGroup that muted it is answered
// (the answer to an earlier request may end after the JoinGroup was
// read).
func (c *conn) answered(answer int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.muted != nil && answer >= c.mutedBy {
		close(c.muted)
		c.muted = nil
	}
}
