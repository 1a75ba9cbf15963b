package calltest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestClient: requests through Client go on while other servers close
// (each Close closes http.DefaultTransport's idle connections), and
// leave no connection open.
func TestClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 50 {
			other := httptest.NewServer(http.NotFoundHandler())
			other.Close()
		}
	})
	for range 200 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, b := Do(t, Client().Do, req)
		if resp.StatusCode != http.StatusOK || string(b) != "ok" || !resp.Close {
			t.Fatalf("%d %q, connection closed after the answer %v", resp.StatusCode, b, resp.Close)
		}
	}
	wg.Wait()
}
