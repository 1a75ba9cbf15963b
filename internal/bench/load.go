package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/squallhq/squall/internal/cputime"
)

// Limits of a [Config].
const (
	// MaxConnections is the most connections a run opens.
	MaxConnections = 10_000
	// MaxBodyBytes is the largest request body.
	MaxBodyBytes = 16 << 20
	// DefaultBody is the body sent when none is given: a small JSON event.
	DefaultBody = `{"host": "squall-bench", "message": "squall bench webhook"}`
)

// ErrUnreachable is returned by [Load.Run] when no connection to the
// target could be opened.
var ErrUnreachable = errors.New("the target could not be reached")

// Header is one request header.
type Header struct {
	Name, Value string
}

// Config configures a [Load].
type Config struct {
	// URL is the target: http or https, with a host.
	URL string
	// Method is the request method (default POST).
	Method string
	// Headers are sent with every request, after Host, User-Agent,
	// Content-Type (application/json unless given here) and
	// Content-Length.
	Headers []Header
	// Body is every request's body (nil: [DefaultBody]).
	Body []byte
	// Connections is the number of keep-alive connections, each with one
	// request in flight at a time.
	Connections int
	// Rate is the target of requests per second over all connections
	// (open-loop); 0 sends each request as soon as a connection is free.
	Rate int64
	// Duration bounds the run: no request is sent after it. Required.
	Duration time.Duration
	// Requests bounds the number of requests; 0 for no bound but Duration.
	Requests int64
	// Timeout bounds each connect and each request, answer included.
	Timeout time.Duration
	// TLS configures https targets (nil: the system's roots).
	TLS *tls.Config
	// Progress, when not nil, receives a progress line every
	// ProgressInterval (default 1 s).
	Progress         io.Writer
	ProgressInterval time.Duration
}

// ConfigError reports an invalid field of a [Config].
type ConfigError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Load is a configured load run against one HTTP target.
type Load struct {
	cfg     Config
	target  *url.URL
	addr    string // host:port to dial
	headers []byte // the header lines of every request, but Content-Length
	request []byte // the whole request, written as is on every send
	// newVary, when not nil, gives each connection a function that
	// appends request n (numbered from 0 in the run) to dst, to send
	// instead of request; the function may keep scratch space.
	newVary func() func(dst []byte, n uint64) []byte
	// stop, when not nil, ends the run once closed (another load's end).
	stop <-chan struct{}
	// label starts the progress lines.
	label string
	seq   atomic.Uint64
}

// New validates cfg and builds the request. It starts nothing.
func New(cfg Config) (*Load, error) {
	if cfg.Method == "" {
		cfg.Method = http.MethodPost
	}
	if cfg.Body == nil {
		cfg.Body = []byte(DefaultBody)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	var errs []error
	add := func(field string, err error) { errs = append(errs, &ConfigError{Field: field, Err: err}) }
	u, err := parseTarget(cfg.URL)
	if err != nil {
		add("url", err)
	}
	if !validToken(cfg.Method) {
		add("method", fmt.Errorf("%q is not a method name", cfg.Method))
	}
	if cfg.Connections < 1 || cfg.Connections > MaxConnections {
		add("connections", fmt.Errorf("%d is not between 1 and %d", cfg.Connections, MaxConnections))
	}
	if cfg.Rate < 0 {
		add("rate", fmt.Errorf("%d is negative", cfg.Rate))
	}
	if cfg.Duration <= 0 {
		add("duration", fmt.Errorf("%s must be positive: every run is bounded in time", cfg.Duration))
	}
	if cfg.Requests < 0 {
		add("requests", fmt.Errorf("%d is negative", cfg.Requests))
	}
	if cfg.Timeout <= 0 {
		add("timeout", fmt.Errorf("%s must be positive", cfg.Timeout))
	}
	if len(cfg.Body) > MaxBodyBytes {
		add("body", fmt.Errorf("%d bytes, more than %d", len(cfg.Body), MaxBodyBytes))
	}
	for _, h := range cfg.Headers {
		if err := checkHeader(h); err != nil {
			add("header", err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	l := &Load{cfg: cfg, target: u, addr: net.JoinHostPort(u.Hostname(), port), label: "bench"}
	l.headers = l.buildHeaders()
	l.request = l.appendRequest(nil, u.RequestURI(), cfg.Body)
	return l, nil
}

// parseTarget parses and checks the target URL.
func parseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: the scheme must be http or https", Redact(s))
	case u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host", Redact(s))
	case u.User != nil:
		return nil, fmt.Errorf("%q carries credentials: give them with --header instead", Redact(s))
	}
	return u, nil
}

// checkHeader refuses what would break the request's framing.
func checkHeader(h Header) error {
	if !validToken(h.Name) {
		return fmt.Errorf("%q is not a header name", h.Name)
	}
	if strings.ContainsAny(h.Value, "\r\n\x00") {
		return fmt.Errorf("the value of %s holds a line break or a NUL", h.Name)
	}
	switch http.CanonicalHeaderKey(h.Name) {
	case "Content-Length", "Transfer-Encoding", "Connection":
		return fmt.Errorf("%s is set by the load generator", h.Name)
	}
	return nil
}

// validToken reports whether s is an HTTP token (RFC 9110): a method or a
// header name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// buildHeaders returns the header lines every request carries, but
// Content-Length.
func (l *Load) buildHeaders() []byte {
	var b strings.Builder
	given := map[string]bool{}
	for _, h := range l.cfg.Headers {
		given[http.CanonicalHeaderKey(h.Name)] = true
	}
	if !given["Host"] {
		fmt.Fprintf(&b, "Host: %s\r\n", l.target.Host)
	}
	if !given["User-Agent"] {
		b.WriteString("User-Agent: squall-bench\r\n")
	}
	if !given["Content-Type"] && len(l.cfg.Body) > 0 {
		b.WriteString("Content-Type: application/json\r\n")
	}
	for _, h := range l.cfg.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h.Name, h.Value)
	}
	return []byte(b.String())
}

// appendRequest appends to dst the request for uri (path and query) with
// body, as written on the wire.
func (l *Load) appendRequest(dst []byte, uri string, body []byte) []byte {
	dst = append(dst, l.cfg.Method...)
	dst = append(dst, ' ')
	dst = append(dst, uri...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	dst = append(dst, l.headers...)
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}

// Redact returns the URL s with its query values and user information
// replaced, for output: a webhook URL carries its token in the query.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Error kinds of requests that got no answer, as named in a [Result].
const (
	KindConnectRefused = "connect_refused" // the target refused the connection
	KindConnect        = "connect"         // another connect failure (DNS, no route, TLS handshake)
	KindTimeout        = "timeout"         // no whole answer within the timeout
	KindReset          = "reset"           // the connection was reset
	KindClosed         = "closed"          // the target closed the connection before a whole answer
	KindOther          = "other"           // anything else, such as a malformed answer
	KindInterrupted    = "interrupted"     // in flight when the run was interrupted
)

// The indexes of the error counters.
const (
	errConnectRefused = iota
	errConnect
	errTimeout
	errReset
	errClosed
	errOther
	errInterrupted
	numErrKinds
)

// kindNames names the error counters.
var kindNames = [numErrKinds]string{KindConnectRefused, KindConnect, KindTimeout, KindReset, KindClosed, KindOther, KindInterrupted}

// kindOf classifies the error of a request; connecting tells whether it
// happened while connecting.
func kindOf(err error, connecting bool) int {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return errConnectRefused
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return errReset
	case connecting:
		return errConnect
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errClosed
	}
	return errOther
}

// shard holds the counts of some of the connections: each connection
// counts into one shard, so that the counters are little contended.
type shard struct {
	latency  Histogram
	status   [600]atomic.Uint64 // answers by status code; codes out of range count at 0
	errors   [numErrKinds]atomic.Uint64
	sent     atomic.Uint64
	connects atomic.Uint64
}

// answered returns the number of answers and of answers that are not 2xx.
func (s *shard) answered() (all, non2xx uint64) {
	for code := range s.status {
		n := s.status[code].Load()
		all += n
		if code < 200 || code > 299 {
			non2xx += n
		}
	}
	return all, non2xx
}

// failed returns the number of requests without an answer.
func (s *shard) failed() (n uint64) {
	for i := range s.errors {
		n += s.errors[i].Load()
	}
	return n
}

// Run sends the load until the duration has passed, the requests are sent
// or ctx is done, waits for the answers in flight (each bounded by the
// timeout) and returns the counts. It returns an error wrapping
// [ErrUnreachable] without sending anything when a first connection
// cannot be opened.
func (l *Load) Run(ctx context.Context) (*Result, error) {
	first, err := l.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, l.addr, err)
	}
	shards := make([]shard, min(l.cfg.Connections, 2*runtime.GOMAXPROCS(0)))
	shards[0].connects.Add(1)
	cpu0, cpuOK := cputime.Process()
	start := time.Now()
	sched := newSchedule(start, l.cfg.Duration, l.cfg.Rate, l.cfg.Requests)
	sched.stop = l.stop
	var wg sync.WaitGroup
	for i := range l.cfg.Connections {
		var c net.Conn
		if i == 0 {
			c = first
		}
		wg.Go(func() { l.connection(ctx, sched, &shards[i%len(shards)], c) })
	}
	done := make(chan struct{})
	var progress sync.WaitGroup
	if l.cfg.Progress != nil {
		progress.Go(func() { l.report(start, shards, done) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	var cpu time.Duration
	if cpu1, ok := cputime.Process(); ok && cpuOK {
		cpu = cpu1 - cpu0
	}
	close(done)
	progress.Wait()
	return l.result(sched, shards, elapsed, cpu), nil
}

// dial opens a connection to the target.
func (l *Load) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: l.cfg.Timeout}
	if l.target.Scheme != "https" {
		return d.DialContext(ctx, "tcp", l.addr)
	}
	cfg := &tls.Config{}
	if l.cfg.TLS != nil {
		cfg = l.cfg.TLS.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = l.target.Hostname()
	}
	cfg.NextProtos = []string{"http/1.1"}
	return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", l.addr)
}

// connection sends requests on one keep-alive connection, one at a time,
// until the schedule is over; it reconnects after an error or an answer
// that closes the connection. c is an open connection or nil.
func (l *Load) connection(ctx context.Context, sched *schedule, s *shard, c net.Conn) {
	var br *bufio.Reader
	var stop func() bool // interrupts c's request in flight when ctx is done
	open := func(nc net.Conn) {
		c = nc
		if br == nil {
			br = bufio.NewReader(c)
		} else {
			br.Reset(c)
		}
		stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	}
	drop := func() {
		stop()
		_ = c.Close()
		c = nil
	}
	if c != nil {
		open(c)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var req []byte // request, or this connection's variations of it
	var vary func(dst []byte, n uint64) []byte
	if l.newVary == nil {
		req = l.request
	} else {
		vary = l.newVary()
	}
	for {
		due, ok := sched.take(ctx, timer)
		if !ok {
			break
		}
		s.sent.Add(1)
		if c == nil {
			nc, err := l.dial(ctx)
			if err != nil {
				s.errors[kindOf(err, true)].Add(1)
				continue
			}
			s.connects.Add(1)
			open(nc)
		}
		if vary != nil {
			req = vary(req[:0], l.seq.Add(1)-1)
		}
		code, closed, err := l.roundTrip(ctx, c, br, req)
		if err != nil {
			k := kindOf(err, false)
			if ctx.Err() != nil {
				k = errInterrupted
			}
			s.errors[k].Add(1)
			drop()
			continue
		}
		s.latency.Record(time.Since(due))
		if code < 0 || code >= len(s.status) {
			code = 0
		}
		s.status[code].Add(1)
		if closed {
			drop()
		}
	}
	if c != nil {
		drop()
	}
}

// roundTrip writes req on c and reads the whole answer from br.
// It returns the status and whether the target closes the connection.
func (l *Load) roundTrip(ctx context.Context, c net.Conn, br *bufio.Reader, req []byte) (code int, closed bool, err error) {
	if err := c.SetDeadline(time.Now().Add(l.cfg.Timeout)); err != nil {
		return 0, false, err
	}
	// ctx's interruption may have set its past deadline just before.
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if _, err := c.Write(req); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, false, err
	}
	return resp.StatusCode, resp.Close, nil
}

// report writes a progress line every interval until done is closed: the
// answers per second since the previous line, the errors so far (non-2xx
// answers and requests without one) and the p99 latency so far.
func (l *Load) report(start time.Time, shards []shard, done <-chan struct{}) {
	t := time.NewTicker(l.cfg.ProgressInterval)
	defer t.Stop()
	var prev uint64
	last := start
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			var h Histogram
			var answers, errs uint64
			for i := range shards {
				a, non2xx := shards[i].answered()
				answers += a
				errs += non2xx + shards[i].failed()
				h.Merge(&shards[i].latency)
			}
			rate := float64(answers-prev) / now.Sub(last).Seconds()
			prev, last = answers, now
			fmt.Fprintf(l.cfg.Progress, "%s %5.0fs  %9.1f req/s  %8d answered  %6d errors  p99 %s\n",
				l.label, now.Sub(start).Seconds(), rate, answers, errs, fmtMillis(h.Quantile(0.99)))
		}
	}
}

// fmtMillis formats d in milliseconds.
func fmtMillis(d time.Duration) string {
	return strconv.FormatFloat(millis(d), 'f', 3, 64) + " ms"
}

// millis returns d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
