// Command plain serves a net/http handler that reads the request body and
// answers 200, until SIGINT or SIGTERM: the ceiling an HTTP intake is
// compared to in the side-by-side benchmarks (package sidebyside).
package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/squallhq/squall/internal/bench/sidebyside"
)

func main() {
	sidebyside.Main("plain", "listen address", func(ctx context.Context, addr, addrFile string) error {
		ln, err := sidebyside.Listen(addr, addrFile)
		if err != nil {
			return err
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20)); err != nil {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		slog.Info("plain handler listening", "addr", ln.Addr().String())
		return sidebyside.Serve(ctx, ln, h)
	})
}
