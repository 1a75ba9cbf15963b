package intake

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// pathPrefix is the path of the webhook endpoint before its {id}.
const pathPrefix = "/engine/webhook/event/"

// FastRoute reports whether a request whose raw path (as sent, escapes
// kept) is path is a webhook call that [Intake.ServeFast] answers as an
// http.ServeMux with [Intake.Register] would: the path is the prefix and
// one clean segment. It returns the segment unescaped, the webhook id. Any
// other path, under the prefix or not, belongs to the net/http mux: it
// redirects paths that are not clean and answers 404 to others. ok and a
// nil error: a webhook call; a non-nil error: a segment whose escapes do
// not parse (net/http answers 400 before routing).
func FastRoute(path []byte) (id string, ok bool, err error) {
	if !bytes.HasPrefix(path, []byte(pathPrefix)) {
		return "", false, nil
	}
	seg := path[len(pathPrefix):]
	if len(seg) == 0 || bytes.IndexByte(seg, '/') >= 0 || string(seg) == "." || string(seg) == ".." {
		return "", false, nil
	}
	if bytes.IndexByte(seg, '%') < 0 {
		return string(seg), true, nil
	}
	id, err = url.PathUnescape(string(seg))
	if err != nil {
		return "", false, err
	}
	return id, true, nil
}

// ServeFast handles one webhook call on a fasthttp server, the one of
// webhook id (see [FastRoute]), as [Intake.ServeHTTP] does on a net/http
// server: the same checks, answers, metrics, spans and logs. The server
// must stream request bodies (fasthttp.Server.StreamRequestBody) and not
// parse multipart forms ahead (DisablePreParseMultipartForm), so that a
// body is read only after the checks before it, and only up to its
// webhook's limit.
func (in *Intake) ServeFast(ctx *fasthttp.RequestCtx, id string) {
	in.serveFast(ctx, id, ctx.URI().QueryString())
}

// requestTarget returns the path and the query of the request of ctx as
// sent, as ctx.URI() gives them (PathOriginal and QueryString), without
// parsing the URI when the target is a plain origin-form one: a single
// leading slash, no control byte and no fragment. The parse also copies
// and normalizes the path, which no webhook call needs.
func requestTarget(ctx *fasthttp.RequestCtx) (path, query []byte) {
	raw := ctx.Request.Header.RequestURI()
	if len(raw) > 1 && raw[0] == '/' && raw[1] != '/' {
		q := -1
		plain := true
		for i, c := range raw {
			if c < ' ' || c == 0x7f || c == '#' {
				plain = false
				break
			}
			if c == '?' && q < 0 {
				q = i
			}
		}
		if plain {
			if q < 0 {
				return raw, nil
			}
			return raw[:q], raw[q+1:]
		}
	}
	u := ctx.URI()
	return u.PathOriginal(), u.QueryString()
}

// serveFast is ServeFast with the call's raw query.
func (in *Intake) serveFast(ctx *fasthttp.RequestCtx, id string, query []byte) {
	start := time.Now()
	method := http.MethodPost
	if !ctx.IsPost() {
		method = string(ctx.Method())
	}
	c := request{ctx: context.Background(), method: method, id: id, query: string(query),
		contentLength: int64(ctx.Request.Header.ContentLength()),
		header:        (*fastHeaders)(&ctx.Request.Header), front: (*fastFront)(ctx)}
	if c.contentLength < 0 {
		c.contentLength = -1
	}
	res := in.handle(&c, start)
	resp := &ctx.Response
	if res.err != nil {
		res.err.setHeaders(&resp.Header)
		resp.Header.SetContentType("application/json")
		resp.SetStatusCode(res.err.status)
		resp.SetBody(res.err.body())
	} else {
		if res.deduplicated {
			resp.Header.Set(HeaderDeduplicated, "true")
		}
		resp.Header.Set(answerEventIDKey, res.eventID)
		resp.Header.SetContentType("application/json")
		resp.SetStatusCode(http.StatusOK)
		resp.AppendBodyString(okPrefix)
		resp.AppendBodyString(res.eventID)
		resp.AppendBodyString(okSuffix)
	}
	in.finish(&c, start, &res)
}

// answerEventIDKey is the name of the answer's Squall-Event-Id field, in
// canonical form.
const answerEventIDKey = "Squall-Event-Id"

// fastHeaders are the header fields of a call on a fasthttp server. Values
// are copied out of the server's buffers, which it reuses once the call is
// answered.
type fastHeaders fasthttp.RequestHeader

// Get returns the first value of the header field name, in the header
// section only, as net/http's Header has it: fasthttp's Peek would also
// look in a chunked body's trailer.
func (h *fastHeaders) Get(name string) string {
	rh := (*fasthttp.RequestHeader)(h)
	if len(rh.PeekTrailerKeys()) > 0 {
		for k, v := range rh.All() {
			if strings.EqualFold(string(k), name) {
				return string(v)
			}
		}
		return ""
	}
	return string(rh.Peek(name))
}

// Values returns all the values of the header field name, in the header
// section only.
func (h *fastHeaders) Values(name string) []string {
	var values []string
	for k, v := range (*fasthttp.RequestHeader)(h).All() {
		if strings.EqualFold(string(k), name) {
			values = append(values, string(v))
		}
	}
	return values
}

// fastFront is the fasthttp server of a call.
type fastFront fasthttp.RequestCtx

func (f *fastFront) rc() *fasthttp.RequestCtx { return (*fasthttp.RequestCtx)(f) }

func (f *fastFront) peer() netip.Addr {
	if a, ok := f.rc().RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}
	return netip.Addr{}
}

func (f *fastFront) remoteAddr() string { return f.rc().RemoteAddr().String() }

// readBody reads the body from the server's stream, a chunk at a time
// into buf, and stops as soon as it has more than limit bytes.
func (f *fastFront) readBody(buf *bytes.Buffer, limit int64) error {
	r := f.rc().RequestBodyStream()
	if r == nil { // the server read the body whole
		body := f.rc().Request.Body()
		if int64(len(body)) > limit {
			return errBodyTooLarge
		}
		buf.Write(body)
		return nil
	}
	for {
		if int64(buf.Len()) > limit {
			return errBodyTooLarge
		}
		if buf.Available() == 0 {
			buf.Grow(4096)
		}
		b := buf.AvailableBuffer()
		b = b[:min(int64(cap(b)), limit+1-int64(buf.Len()))]
		n, err := r.Read(b)
		buf.Write(b[:n])
		if err == io.EOF {
			if int64(buf.Len()) > limit {
				return errBodyTooLarge
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// discard reads and drops at most n more bytes of the body, for at most d;
// the answer then goes out with Connection: close and the connection closes
// without the rest being read. Like net/http, it closes gently: a client
// still sending would otherwise get a reset, which can destroy the answer
// before it reads it.
func (f *fastFront) discard(n int64, d time.Duration) {
	rc := f.rc()
	rc.SetConnectionClose()
	r := rc.RequestBodyStream()
	if r == nil {
		return
	}
	if d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
	}
	_, _ = io.CopyN(io.Discard, r, n)
	if conn := rc.Conn(); conn != nil {
		rc.HijackSetNoResponse(true)
		rc.Hijack(func(c net.Conn) { answerAndLinger(rc, conn, c) })
	}
}

// lingerTime and lingerBytes bound how long and how much of a refused body
// is read and dropped after the answer, before the connection closes.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 1 << 20
)

// answerAndLinger writes the answer of rc on c, the hijacked connection
// (conn underneath), shuts its writing side, and keeps the connection for
// lingerTime, or until the client closes it, reading and dropping at most
// lingerBytes of what it still sends, so that the client reads the answer
// before the connection closes (net/http waits 500 ms too).
func answerAndLinger(rc *fasthttp.RequestCtx, conn, c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(lingerTime))
	if _, err := rc.Response.WriteTo(c); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	end := time.Now().Add(lingerTime)
	_ = c.SetReadDeadline(end)
	if _, err := io.CopyN(io.Discard, c, lingerBytes); err == nil {
		// The client sends on: stop reading, so that its writes block
		// rather than fail, until the end of the linger. Closing now
		// would reset the connection under the answer.
		time.Sleep(time.Until(end))
	}
}
