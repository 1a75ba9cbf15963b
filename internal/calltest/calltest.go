// Package calltest sends HTTP requests in tests and reads their answers
// whole, failing the test on any transport error.
package calltest

import (
	"io"
	"net/http"
	"testing"
)

// Do sends req with send (an http.Client's Do, or a RoundTripper's
// RoundTrip to follow no redirect) and returns the answer with its body
// read and closed.
func Do(t testing.TB, send func(*http.Request) (*http.Response, error), req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := send(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
