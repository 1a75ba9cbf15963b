package intake

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Front ends of the intake: the tests of its answers run against both.
const (
	frontNetHTTP  = "net/http"
	frontFastHTTP = "fasthttp"
)

// forFronts runs f once per front end, as parallel subtests.
func forFronts(t *testing.T, f func(t *testing.T, front string)) {
	t.Helper()
	for _, front := range []string{frontNetHTTP, frontFastHTTP} {
		t.Run(front, func(t *testing.T) {
			t.Parallel()
			f(t, front)
		})
	}
}

// testServer is a real loopback listener serving an Intake through one of
// its front ends.
type testServer struct {
	// URL is http://host:port.
	URL string
	// Addr is host:port.
	Addr   string
	client *http.Client
}

// Client returns a client of the server, with its own keep-alive pool.
func (s *testServer) Client() *http.Client { return s.client }

// serveFront serves h, a net/http handler on which in is registered,
// through front: net/http serves h; fasthttp serves in.NewServer(h), the
// webhook calls by the intake itself. Both stop at the end of the test.
func serveFront(t *testing.T, front string, in *Intake, h http.Handler, cfg ServerConfig) *testServer {
	t.Helper()
	if front == frontNetHTTP {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return &testServer{URL: srv.URL, Addr: srv.Listener.Addr().String(), client: srv.Client()}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := in.NewServer(h, cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(Listener(ln, cfg)) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), client: &http.Client{Transport: tr}}
}
