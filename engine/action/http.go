package action

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/httpguard"
)

// HeaderIdempotencyKey is the header of the http action's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// maxDrain bounds the response body read (and discarded) to reuse the
// connection.
const maxDrain = 64 << 10

// httpExecutor sends one request per action. Payload:
//   - url (string, required): http or https, host allowed by the config;
//   - method (string): GET, HEAD, POST, PUT, PATCH or DELETE; default POST;
//   - headers (object of strings): request headers;
//   - body (any JSON): sent as JSON. Without body, POST, PUT and PATCH send
//     the payload minus url, method and headers; GET, HEAD and DELETE send
//     nothing.
//
// When the action has an event id, the request carries an
// Idempotency-Key header (unless headers sets one): the action's
// [tree.Action.IdempotencyKey] in double quotes, the same for every
// attempt and every redelivery of the event, so that a target that honours
// the header applies the action once.
//
// A 2xx status succeeds; 408, 425, 429, 5xx, a network error and a timeout
// are retriable; anything else (other 4xx, 3xx: redirects are never
// followed) is permanent. Neither header values nor the URL's query and
// user info appear in errors or logs: they may hold secrets.
type httpExecutor struct {
	client  *http.Client
	timeout time.Duration
	schemes []string
	hosts   []string
	anyHost bool
	// tracing passes the trace on to the targets (traceparent).
	tracing bool
}

var (
	_ Executor  = (*httpExecutor)(nil)
	_ io.Closer = (*httpExecutor)(nil)
)

// noRedirectClient returns a copy of client (nil: a client with a
// transport of its own) that follows no redirect: a 3xx is the answer.
func noRedirectClient(client *http.Client) *http.Client {
	var c http.Client
	if client != nil {
		c = *client
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func newHTTPExecutor(cfg HTTPConfig, client *http.Client) *httpExecutor {
	return &httpExecutor{
		client:  noRedirectClient(client),
		timeout: time.Duration(cfg.Timeout),
		schemes: cfg.AllowedSchemes,
		hosts:   cfg.AllowedHosts,
		anyHost: cfg.AllowAnyHost,
	}
}

// httpMethods are the methods accepted; the value tells whether a body is
// sent by default.
var httpMethods = map[string]bool{
	http.MethodGet: false, http.MethodHead: false, http.MethodDelete: false,
	http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
}

// Execute sends the request.
func (h *httpExecutor) Execute(ctx context.Context, a tree.Action) error {
	raw, ok := a.Payload["url"].(string)
	if !ok || raw == "" {
		return payloadError(IDHTTP, "url", "must be a non-empty string")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL
		}
		return payloadError(IDHTTP, "url", "is not a URL: "+err.Error())
	}
	target := redactURL(u)
	if err := h.allowed(u); err != nil {
		return NewPermanent(fmt.Errorf("http %s: %w", target, err))
	}

	method := http.MethodPost
	if v, ok := a.Payload["method"]; ok {
		s, _ := v.(string)
		method = strings.ToUpper(s)
	}
	bodyByDefault, ok := httpMethods[method]
	if !ok {
		return payloadError(IDHTTP, "method", "must be one of GET, HEAD, POST, PUT, PATCH, DELETE")
	}

	header := make(http.Header)
	if v, ok := a.Payload["headers"]; ok {
		hs, ok := v.(map[string]any)
		if !ok {
			return payloadError(IDHTTP, "headers", "must be an object of strings")
		}
		for name, v := range hs {
			s, ok := v.(string)
			if !ok {
				return payloadError(IDHTTP, "headers", fmt.Sprintf("%q must be a string", name))
			}
			if !httpguard.ValidFieldName(name) || strings.ContainsAny(s, "\r\n\x00") {
				return payloadError(IDHTTP, "headers", fmt.Sprintf("%q is not a valid header", name))
			}
			header.Add(name, s)
		}
	}

	var body []byte
	if v, ok := a.Payload["body"]; ok {
		if method == http.MethodGet || method == http.MethodHead {
			return payloadError(IDHTTP, "body", "is not allowed with "+method)
		}
		if body, err = json.Marshal(v); err != nil {
			return payloadError(IDHTTP, "body", "is not JSON: "+err.Error())
		}
	} else if bodyByDefault {
		rest := make(map[string]any, len(a.Payload))
		for k, v := range a.Payload {
			if k != "url" && k != "method" && k != "headers" {
				rest[k] = v
			}
		}
		if body, err = json.Marshal(rest); err != nil {
			return payloadError(IDHTTP, "payload", "is not JSON: "+err.Error())
		}
	}

	reqCtx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, u.String(), reader)
	if err != nil {
		return NewPermanent(fmt.Errorf("http %s %s: %w", method, target, unwrapURLError(err)))
	}
	req.Header = header
	if host := header.Get("Host"); host != "" {
		req.Host = host
	}
	if body != nil && header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key := a.IdempotencyKey(); key != "" && header.Get(HeaderIdempotencyKey) == "" {
		// A structured-field string, as the IETF draft defines the
		// header.
		req.Header.Set(HeaderIdempotencyKey, `"`+key+`"`)
	}
	if h.tracing {
		traceRequest(ctx, req, target)
	}

	resp, err := h.client.Do(req)
	if err != nil {
		err = requestError(ctx, reqCtx, h.timeout, err)
		return NewRetriable(fmt.Errorf("http %s %s: %w", method, target, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if h.tracing {
		traceStatus(ctx, resp.StatusCode)
	}
	if err := resp.Body.Close(); err != nil {
		return NewRetriable(fmt.Errorf("http %s %s: read response: %w", method, target, err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	statusErr := &StatusError{Method: method, URL: target, StatusCode: resp.StatusCode}
	switch c := resp.StatusCode; {
	case c >= 500, c == http.StatusRequestTimeout, c == http.StatusTooEarly, c == http.StatusTooManyRequests:
		return NewRetriable(statusErr)
	}
	return NewPermanent(statusErr)
}

// StatusError reports an http action answered with a status other than 2xx.
type StatusError struct {
	// Method is the request method.
	Method string
	// URL is the target without its query and user info.
	URL string
	// StatusCode is the response status.
	StatusCode int
}

// Error implements error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("http %s %s: status %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
}

// allowed checks the URL's scheme and host against the configuration.
func (h *httpExecutor) allowed(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	ok := false
	for _, s := range h.schemes {
		ok = ok || s == scheme
	}
	if !ok {
		return fmt.Errorf("%w: url scheme %q is not allowed", ErrInvalidPayload, u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return fmt.Errorf("%w: url has no host", ErrInvalidPayload)
	}
	if h.anyHost {
		return nil
	}
	ip, ipErr := netip.ParseAddr(host)
	for _, allowed := range h.hosts {
		if suffix, wild := strings.CutPrefix(allowed, "*."); wild {
			if ipErr != nil && strings.HasSuffix(host, "."+suffix) {
				return nil
			}
		} else if host == allowed {
			return nil
		} else if a, err := netip.ParseAddr(allowed); err == nil && ipErr == nil && a.Unmap() == ip.Unmap() {
			return nil
		}
	}
	return fmt.Errorf("%w: host %q is not in http.allowed_hosts", ErrInvalidPayload, host)
}

// redactURL renders a URL for errors and logs: scheme, host and path only.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// requestError says why a request sent with reqCtx, derived from ctx with
// timeout, got no answer: the timeout when reqCtx's deadline passed while
// ctx was still live, else the transport's error without its URL.
func requestError(ctx, reqCtx context.Context, timeout time.Duration, err error) error {
	if ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no response within %s: %w", timeout, context.DeadlineExceeded)
	}
	return unwrapURLError(err)
}

// unwrapURLError drops the *url.Error layer, whose text quotes the whole URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Close closes the idle connections.
func (h *httpExecutor) Close() error {
	h.client.CloseIdleConnections()
	return nil
}
