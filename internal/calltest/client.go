package calltest

import "net/http"

// Client returns an HTTP client for a test's requests, with a transport
// of its own that keeps no connection between requests. Tests must not
// send through http.DefaultTransport (http.DefaultClient, http.Get,
// http.Post, a Client without a Transport): an httptest.Server that
// closes, in any test of the package, closes that shared transport's
// idle connections, and a request of a parallel test that was about to
// reuse one fails ("http: CloseIdleConnections called"). With no idle
// connection there is nothing to close nor to leak, so a Client needs no
// cleanup and may be made for each request. Its settings are otherwise
// http.DefaultTransport's. Client().Transport.RoundTrip sends a request
// without following redirects.
func Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr}
}
