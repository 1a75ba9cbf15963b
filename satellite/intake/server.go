package intake

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/squallhq/squall/internal/httpguard"
)

// ServerConfig configures [Intake.NewServer]. Zero durations and sizes take
// their defaults.
type ServerConfig struct {
	// HeaderTimeout bounds reading a request's line and headers, from its
	// first byte (default 10 s); BodyTimeout, reading its body, from the
	// end of the headers (default 1 min); IdleTimeout, the wait for the
	// next request on a kept-alive connection (default 2 min).
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (default 16 KiB):
	// larger ones are answered 431. It is each connection's read buffer.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once (default
	// DefaultMaxConns). [Listener] answers one more with 503 OVERLOADED,
	// Retry-After and Connection: close, without handing it to the
	// server, and closes it.
	MaxConns int
	// RetryAfter is the Retry-After of that answer (default
	// DefaultRetryAfter).
	RetryAfter time.Duration
	// Refused, when set, counts the connections refused over MaxConns.
	Refused prometheus.Counter
	// TLS, when set, is the configuration of an HTTPS listener: give the
	// server a listener made with tls.NewListener(ln, server.TLSConfig).
	// The server offers HTTP/1.1 only, whatever TLS.NextProtos says.
	TLS *tls.Config
	// Logger takes the server's own messages (at warning level; the
	// errors of single connections at debug level).
	Logger *slog.Logger
}

// Defaults of ServerConfig.
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout    = time.Minute
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultMaxHeaderBytes = 16 << 10
	DefaultMaxConns       = 4096
)

// withDefaults returns cfg with the defaults in place of zero values.
func (cfg ServerConfig) withDefaults() ServerConfig {
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	return cfg
}

// NewServer returns a fasthttp server for the intake (docs/decisions.md
// decision 42): webhook calls served natively by [Intake.ServeFast], every
// other route by fallback, a net/http handler (the satellite's mux with
// /healthz, /readyz, /metrics and its 404), through fasthttpadaptor. The
// answers are those of fallback with the intake registered on it
// ([Intake.Register]), but for requests whose body framing is ambiguous:
// they are refused (400, connection closed). Serve it with Serve on a
// listener wrapped by [Listener] (with cfg) and stop it with ShutdownWithContext; it
// drains the calls in progress.
func (in *Intake) NewServer(fallback http.Handler, cfg ServerConfig) *fasthttp.Server {
	cfg = cfg.withDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	others := fasthttpadaptor.NewFastHTTPHandler(detached(fallback))
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			// fasthttp does not recover a handler's panic: it would stop
			// the process. net/http logs it and closes the connection.
			defer recoverPanic(ctx, logger, in.m.panics)
			if refuseFraming(ctx) {
				return
			}
			path, query := requestTarget(ctx)
			id, ok, err := FastRoute(path)
			switch {
			case err != nil:
				answerText(ctx, http.StatusBadRequest, "") // as net/http
				ctx.SetConnectionClose()
			case ok:
				in.serveFast(ctx, id, query)
			default:
				// No other route reads a body: keep the adaptor from
				// reading it whole. The server drains or closes.
				ctx.Request.SetBodyRaw([]byte{})
				others(ctx)
			}
		},
		ErrorHandler: answerParseError,
		// The headers get ReadHeaderTimeout from their first byte; the
		// body, ReadTimeout from the end of the headers.
		ReadTimeout: cfg.HeaderTimeout,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: cfg.BodyTimeout}
		},
		IdleTimeout:    cfg.IdleTimeout,
		ReadBufferSize: cfg.MaxHeaderBytes,
		// Bodies are streamed to the handler, which reads them only after
		// the checks that come first, up to the webhook's limit. The
		// server reads ahead at most MaxRequestBodySize bytes of a body
		// (and 8 KiB) before it calls the handler: one byte. A larger
		// value would hold the answer to a call refused before its body
		// until that much of the body came.
		StreamRequestBody:            true,
		MaxRequestBodySize:           1,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		// Nothing reads the request's time (RequestCtx.Time): fasthttp
		// then reads no clock for it.
		LazyRequestTime: true,
		CloseOnShutdown: true,
		Logger:          fastLogger{logger},
	}
	if cfg.TLS != nil {
		srv.TLSConfig = http11Only(cfg.TLS)
	}
	return srv
}

// http11Only returns a copy of cfg that offers HTTP/1.1 alone through ALPN:
// the satellite's server does not speak HTTP/2.
func http11Only(cfg *tls.Config) *tls.Config {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	if get := cfg.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if c == nil || err != nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = []string{"http/1.1"}
			return c, nil
		}
	}
	return cfg
}

// refuseFraming answers 400 and closes the connection when a request's body
// framing is ambiguous, a request smuggling attempt: Transfer-Encoding
// with Content-Length, or a Transfer-Encoding other than chunked (which
// fasthttp would take as no body). fasthttp refuses repeated
// Content-Length and Transfer-Encoding fields itself. The raw headers are
// looked at only when the parsed ones leave room for doubt.
func refuseFraming(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	if n := h.ContentLength(); n > 0 && !h.ConnectionClose() {
		return false
	}
	var lengths, encodings int
	chunked := false
	for line := range bytes.SplitSeq(h.RawHeaders(), []byte("\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")):
			lengths++
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Transfer-Encoding")):
			encodings++
			chunked = bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked"))
		}
	}
	if encodings == 0 || (lengths == 0 && encodings == 1 && chunked) {
		return false
	}
	answerText(ctx, http.StatusBadRequest, "ambiguous body framing: Transfer-Encoding must be chunked, without Content-Length")
	ctx.SetConnectionClose()
	return true
}

// recoverPanic, deferred by a handler, turns its panic into a JSON 500
// naming a request id (as httpguard.Recover answers on net/http), a log
// line with the panic and its stack under that id, and a count; the
// connection then closes.
func recoverPanic(ctx *fasthttp.RequestCtx, logger *slog.Logger, panics prometheus.Counter) {
	v := recover()
	if v == nil {
		return
	}
	id := httpguard.NewRequestID()
	panics.Inc()
	logger.Error("panic serving a request", "request_id", id, "remote", ctx.RemoteAddr().String(), "panic", fmt.Sprint(v),
		"stack", string(debug.Stack()))
	ctx.Response.Reset()
	ctx.SetStatusCode(http.StatusInternalServerError)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set(httpguard.HeaderRequestID, id)
	ctx.SetBody(httpguard.InternalErrorBody(id))
	ctx.SetConnectionClose()
}

// answerParseError answers a request the server could not read, as
// net/http does: 431 for headers over the read buffer, 408 for a request
// that did not arrive in time, 400 otherwise; the server then closes the
// connection.
func answerParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		answerText(ctx, http.StatusRequestHeaderFieldsTooLarge, "")
	case errors.As(err, &ne) && ne.Timeout():
		answerText(ctx, http.StatusRequestTimeout, "")
	default:
		answerText(ctx, http.StatusBadRequest, "")
	}
}

// answerText answers status with a plain text body: the status, and
// detail when not empty.
func answerText(ctx *fasthttp.RequestCtx, status int, detail string) {
	body := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if detail != "" {
		body += ": " + detail
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(body)
}

// detached passes h a copy of each request whose strings are its own:
// fasthttpadaptor's point into the server's buffers, reused once the
// request is answered.
func detached(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := *r
		d.Method = strings.Clone(r.Method)
		d.Proto = strings.Clone(r.Proto)
		d.Host = strings.Clone(r.Host)
		d.RequestURI = strings.Clone(r.RequestURI)
		d.RemoteAddr = strings.Clone(r.RemoteAddr)
		d.TransferEncoding = slices.Clone(r.TransferEncoding)
		for i, v := range d.TransferEncoding {
			d.TransferEncoding[i] = strings.Clone(v)
		}
		if u, err := url.ParseRequestURI(d.RequestURI); err == nil {
			d.URL = u
		}
		d.Header = make(http.Header, len(r.Header))
		for k, vs := range r.Header {
			c := make([]string, len(vs))
			for i, v := range vs {
				c[i] = strings.Clone(v)
			}
			d.Header[strings.Clone(k)] = c
		}
		h.ServeHTTP(w, &d)
	})
}

// fastLogger logs fasthttp's messages at warning level, but for the error
// of each connection that ended badly (a malformed request, a failed TLS
// handshake): at debug level, so that a client cannot fill the log, as
// net/http answers a malformed request without a line.
type fastLogger struct{ logger *slog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	level := slog.LevelWarn
	if strings.HasPrefix(format, "error when serving connection") {
		level = slog.LevelDebug
	}
	l.logger.Log(context.Background(), level, "http server", "message", fmt.Sprintf(format, args...))
}
