package intake

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// connLimit bounds the connections a [Listener] hands to the server. One
// over the bound is refused: it is answered 503 OVERLOADED with
// Retry-After and Connection: close (over TLS once the handshake is done)
// once its request's headers came, whatever they say; the rest of what the
// client sends is read and dropped for a moment, so that the client reads
// the answer, and the connection is closed; one whose headers do not come
// in time is closed without an answer. At most maxRefusing
// connections are refused so at once, each for refuseTime at most; past
// that the listener accepts no connection until a refusal ends, and the
// new ones wait in the kernel's backlog. A refused connection costs a
// goroutine and a few kilobytes for a second at most, never the server's
// buffers.
type connLimit struct {
	max      int64
	open     atomic.Int64
	refusing chan struct{} // a slot per refusal in progress
	answer   []byte
	tls      *tls.Config // nil: plain HTTP
	maxHead  int         // ServerConfig.MaxHeaderBytes
}

// maxRefusing and refuseTime bound the refusals in progress: how many, and
// for how long each (TLS handshake, answer and linger).
const (
	maxRefusing = 64
	refuseTime  = time.Second
)

func newConnLimit(cfg ServerConfig) *connLimit {
	e := &apiError{status: http.StatusServiceUnavailable, code: CodeOverloaded, retryAfter: cfg.RetryAfter,
		params:  map[string]any{"max_connections": cfg.MaxConns},
		message: fmt.Sprintf("the satellite has %d connections open, its bound: retry later", cfg.MaxConns)}
	body := e.body()
	answer := "HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: " + strconv.Itoa(int((cfg.RetryAfter+time.Second-1)/time.Second)) + "\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
	l := &connLimit{max: int64(cfg.MaxConns), answer: []byte(answer), refusing: make(chan struct{}, maxRefusing),
		maxHead: cfg.MaxHeaderBytes}
	if cfg.TLS != nil {
		l.tls = http11Only(cfg.TLS)
	}
	return l
}

// admit counts a connection in, unless the bound is reached.
func (l *connLimit) admit() bool {
	if l.open.Add(1) > l.max {
		l.open.Add(-1)
		return false
	}
	return true
}

// release counts a connection out.
func (l *connLimit) release() { l.open.Add(-1) }

// refuse answers c 503 and closes it, in a goroutine of its own, once
// fewer than maxRefusing are in progress: it waits for one to end (for
// refuseTime at most).
func (l *connLimit) refuse(c net.Conn) {
	l.refusing <- struct{}{}
	go func() {
		defer func() { <-l.refusing }()
		l.answerAndClose(c)
	}()
}

// answerAndClose waits for the end of a request's headers on c, writes the
// 503, shuts its writing side, reads and drops what the client sends until
// it closes or refuseTime passed (as answerAndLinger does), and closes c.
func (l *connLimit) answerAndClose(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseTime))
	conn := c
	if l.tls != nil {
		tc := tls.Server(c, l.tls)
		if err := tc.Handshake(); err != nil {
			return
		}
		conn = tc
	}
	if !readHead(conn, l.maxHead) {
		return
	}
	if _, err := conn.Write(l.answer); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, conn, lingerBytes)
}

// headEnd ends the headers of a request.
var headEnd = []byte("\r\n\r\n")

// readHead reads from r up to the end of a request's headers and reports
// whether it came within max bytes (and r's deadline).
func readHead(r io.Reader, max int) bool {
	buf := make([]byte, 0, 4096)
	for total := 0; total <= max; {
		keep := min(len(buf), len(headEnd)-1) // the end may span two reads
		copy(buf, buf[len(buf)-keep:])
		n, err := r.Read(buf[keep:cap(buf)])
		buf = buf[:keep+n]
		total += n
		if bytes.Contains(buf, headEnd) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}
