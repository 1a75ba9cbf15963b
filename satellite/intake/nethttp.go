package intake

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/httpguard"
)

var _ http.Handler = (*Intake)(nil)

// Register adds the webhook endpoint to mux.
func (in *Intake) Register(mux *http.ServeMux) { mux.Handle(Pattern, in) }

// ServeHTTP handles one webhook call on a net/http server. It answers 200
// {"event_id": …} once the sink took the event, or an error with a JSON
// body.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.PathValue("id")
	if id == "" {
		id = strings.TrimPrefix(r.URL.Path, "/engine/webhook/event/")
	}
	front := &httpFront{w: w, r: r}
	c := request{ctx: r.Context(), method: r.Method, id: id, query: r.URL.RawQuery, contentLength: r.ContentLength,
		header: r.Header, front: front}
	if r.ContentLength < 0 {
		c.contentLength = -1
	}
	res := in.handle(&c, start)
	h := w.Header()
	if res.err != nil {
		res.err.setHeaders(h)
		if !front.read && (r.ContentLength < 0 || r.ContentLength > keepAliveBody) && r.Body != nil && r.Body != http.NoBody {
			// Refused before its body was read, and the body may not
			// have arrived yet: answered at once, and the connection
			// closes instead of waiting for the rest. A small declared
			// body came with the headers: the connection is kept.
			h.Set("Connection", "close")
		}
		b := res.err.body()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(res.err.status)
		w.Write(b)
	} else {
		if res.deduplicated {
			h.Set(HeaderDeduplicated, "true")
		}
		values := make([]string, 3) // one allocation for the three headers
		values[0], values[1], values[2] = res.eventID, "application/json", strconv.Itoa(len(okPrefix)+len(res.eventID)+len(okSuffix))
		h["Squall-Event-Id"] = values[0:1:1]
		h["Content-Type"] = values[1:2:2]
		h["Content-Length"] = values[2:3:3]
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, okPrefix)
		io.WriteString(w, res.eventID)
		io.WriteString(w, okSuffix)
	}
	in.finish(&c, start, &res)
}

// keepAliveBody is the largest declared body of a refused call whose
// connection is kept: one that fits in the server's first read with the
// headers (net/http reads 4 KiB at a time).
const keepAliveBody = 4 << 10

// httpFront is the net/http server of a call.
type httpFront struct {
	w    http.ResponseWriter
	r    *http.Request
	read bool // readBody was called
}

func (f *httpFront) peer() netip.Addr {
	if ap, err := netip.ParseAddrPort(f.r.RemoteAddr); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(f.r.RemoteAddr)
	return a
}

func (f *httpFront) remoteAddr() string { return f.r.RemoteAddr }

func (f *httpFront) readBody(buf *bytes.Buffer, limit int64) error {
	f.read = true
	// MaxBytesReader stops at the limit and makes the server close the
	// connection instead of reading the rest.
	if _, err := buf.ReadFrom(http.MaxBytesReader(f.w, f.r.Body, limit)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errBodyTooLarge
		}
		return err
	}
	return nil
}

func (f *httpFront) discard(n int64, d time.Duration) {
	httpguard.Discard(f.w, f.r.Body, n, d)
}
