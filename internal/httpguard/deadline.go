package httpguard

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Timeouts of a server. The zero value of a field means its default.
type Timeouts struct {
	// Header bounds reading a request's headers (default 10 s).
	Header time.Duration
	// Body bounds reading a request's body, from the end of its headers
	// (default 30 s). Requests without a body are not bounded by it.
	Body time.Duration
	// Idle closes kept-alive connections idle for longer (default 2 min).
	Idle time.Duration
}

// Defaults of Timeouts.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
)

// WithDefaults returns t with its zero fields set to their defaults.
func (t Timeouts) WithDefaults() Timeouts {
	if t.Header <= 0 {
		t.Header = DefaultHeaderTimeout
	}
	if t.Body <= 0 {
		t.Body = DefaultBodyTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// Server returns an http.Server for h with the header and idle timeouts
// of t, h wrapped by BodyDeadline.
func (t Timeouts) Server(h http.Handler) *http.Server {
	t = t.WithDefaults()
	return &http.Server{
		Handler:           BodyDeadline(h, t.Body),
		ReadHeaderTimeout: t.Header,
		IdleTimeout:       t.Idle,
	}
}

// BodyDeadline sets a read deadline d from now on the connection of every
// request that has a body, and lifts it once the body has been read to its
// end. http.Server.ReadTimeout would also bound requests without a body,
// and its expiry cancels their context: a long poll (the tree watch) would
// be cut at the deadline.
//
// A body not read to its end when the deadline passes fails with a
// timeout (see IsTimeout), and the server closes the connection.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || d <= 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			// A writer that cannot set deadlines (a test recorder):
			// serve without.
			h.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline at the end of the body.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.lifted.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
	}
	return n, err
}

// IsTimeout reports whether err is a read that hit its deadline.
func IsTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// Discard reads and drops at most limit bytes of what is left of body (the
// request's own body, not a http.MaxBytesReader around it), for at most d,
// and tells the server to close the connection after the answer. Call it
// before answering a body that is refused unread or half read (413), so
// that a client writing its whole body before it reads the answer gets the
// answer. A body longer than limit, or slower than d, is cut: the client
// then sees the connection closed.
func Discard(w http.ResponseWriter, body io.Reader, limit int64, d time.Duration) {
	w.Header().Set("Connection", "close")
	if body == nil || body == http.NoBody {
		return
	}
	if d > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
	}
	_, _ = io.CopyN(io.Discard, body, limit)
}
