// Package sidebyside holds the baselines the real processes of Squall are
// measured against, side by side in one run (docs/BENCHMARKS.md, "Side by
// side"), and what they share. Each baseline is a small program of its own:
//
//   - broker: a kfake Kafka broker in its own process, so that its CPU is
//     not counted against the program under test;
//   - plain: a net/http handler that reads the body and answers 200, the
//     ceiling of an HTTP intake on the machine;
//   - naive: a net/http handler that writes each body to Kafka and answers
//     200 once the write is acknowledged (acks=all), with kafka-go's Writer
//     through engine/kafkasource (only Kafka adapters import kafka-go);
//   - bareconsumer: a consumer-group member that reads each record and
//     decodes its JSON in one goroutine, the floor an engine is compared to.
//
// run.sh builds them with squall, starts the broker, a squall satellite,
// plain and naive, loads each in turn with squall bench webhook in
// interleaved rounds and prints the ratios; then it preloads a topic and
// lets squall engine and the bare consumer drain it in turn, measured with
// squall bench engine. TestSideBySide (this package) runs it with a tiny
// configuration.
package sidebyside

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// Listen listens on addr (host:port; port 0 picks one) and, when file is
// not empty, writes the address it got into file, atomically, for a script
// to read.
func Listen(addr, file string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := WriteAddr(file, ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// WriteAddr writes addr into file (nothing when file is empty), through a
// temporary file renamed into place, so that a reader never sees half of it.
func WriteAddr(file, addr string) error {
	if file == "" {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".addr-*")
	if err != nil {
		return fmt.Errorf("address file: %w", err)
	}
	if _, err := tmp.WriteString(addr + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("address file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("address file: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("address file: %w", err)
	}
	return nil
}

// SignalContext returns a context that ends on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Serve serves h on ln until ctx ends, then shuts the server down within
// five seconds.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Main runs a baseline program named name: it defines --addr (the listen
// address, described by addrUsage) and --addr-file (see WriteAddr), parses
// the command line, and calls run with a context that ends on SIGINT or
// SIGTERM. An error is printed after the program's name, and the process
// exits with status 1. Flags of the program's own are defined before.
func Main(name, addrUsage string, run func(ctx context.Context, addr, addrFile string) error) {
	addr := flag.String("addr", "127.0.0.1:0", addrUsage)
	addrFile := flag.String("addr-file", "", "file to write the address listened on into")
	flag.Parse()
	ctx, stop := SignalContext()
	err := run(ctx, *addr, *addrFile)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
