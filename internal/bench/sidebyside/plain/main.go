// Command plain serves a net/http handler that reads the request body and
// answers 200, until SIGINT or SIGTERM: the ceiling an HTTP intake is
// compared to in the side-by-side benchmarks (package sidebyside).
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/squallhq/squall/internal/bench/sidebyside"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "plain:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "file to write the address listened on into")
	flag.Parse()
	ctx, stop := sidebyside.SignalContext()
	defer stop()
	ln, err := sidebyside.Listen(*addr, *addrFile)
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
}
