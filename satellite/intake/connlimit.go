package intake

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimit bounds the connections a [Listener] hands to the server. One
// over the bound is refused: its request is read (over TLS once the
// handshake is done: headers up to ServerConfig.MaxHeaderBytes, a body up
// to lingerBytes, dropped), within refuseTime, and answered 503 OVERLOADED
// with Retry-After and Connection: close, whatever it asked; what the
// client still sends is read and dropped for lingerTime at most, so that
// the client reads the answer, and the connection is closed. One whose
// request does not come in time, or does not parse, is closed without an
// answer. At most maxRefusing connections are refused so at once; past
// that the listener accepts no connection until a refusal ends, and the
// new ones wait in the kernel's backlog. A refused connection costs a
// goroutine and a few kilobytes for a few seconds at most, never the
// server's buffers.
type connLimit struct {
	max      int64
	open     atomic.Int64
	refusing chan struct{} // a slot per refusal in progress
	answer   []byte
	tls      *tls.Config        // nil: plain HTTP
	maxHead  int64              // ServerConfig.MaxHeaderBytes
	refused  prometheus.Counter // nil: not counted
}

// maxRefusing and refuseTime bound the refusals in progress: how many, and
// for how long each reads its request (TLS handshake included).
const (
	maxRefusing = 64
	refuseTime  = 5 * time.Second
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
		maxHead: int64(cfg.MaxHeaderBytes), refused: cfg.Refused}
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
// fewer than maxRefusing are in progress: it waits for one to end.
func (l *connLimit) refuse(c net.Conn) {
	if l.refused != nil {
		l.refused.Inc()
	}
	l.refusing <- struct{}{}
	go func() {
		defer func() { <-l.refusing }()
		l.answerAndClose(c)
	}()
}

// answerAndClose reads a request on c, writes the 503, shuts its writing
// side, reads and drops what the client sends until it closes or
// lingerTime passed (as answerAndLinger does), and closes c.
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
	// The headers may take maxHead bytes, the body lingerBytes more.
	lr := &io.LimitedReader{R: conn, N: l.maxHead}
	req, err := http.ReadRequest(bufio.NewReader(lr))
	if err != nil {
		return
	}
	if !strings.EqualFold(req.Header.Get("Expect"), "100-continue") { // else the body waits for a 100
		lr.N += lingerBytes
		_, _ = io.Copy(io.Discard, req.Body)
	}
	_ = c.SetDeadline(time.Now().Add(lingerTime))
	if _, err := conn.Write(l.answer); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, conn, lingerBytes)
}
