// Command naive serves a net/http handler that writes each request body to
// Kafka synchronously, one record per request with kafka-go's Writer
// (acks=all, through engine/kafkasource), and answers 200 once it is
// acknowledged, until SIGINT or SIGTERM: the straightforward intake the
// satellite is compared to in the side-by-side benchmarks (package
// sidebyside).
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/bench/sidebyside"
)

func main() {
	brokers := flag.String("kafka-brokers", "", "Kafka broker, host:port (required)")
	topic := flag.String("topic", "squall.events", "topic to write to")
	key := flag.String("key", "bench", "key of every record")
	batchTimeout := flag.Duration("batch-timeout", kafkasource.DefaultBatchTimeout, "kafka-go Writer's BatchTimeout")
	sidebyside.Main("naive", "listen address", func(ctx context.Context, addr, addrFile string) error {
		if *brokers == "" {
			return errors.New("--kafka-brokers is required")
		}
		w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{*brokers}},
			Topic: *topic, BatchTimeout: *batchTimeout})
		if err != nil {
			return err
		}
		defer w.Close()
		ln, err := sidebyside.Listen(addr, addrFile)
		if err != nil {
			return err
		}
		k := []byte(*key)
		h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, 1<<20))
			if err != nil {
				http.Error(rw, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			if err := w.Write(r.Context(), kafkasource.Record{Key: k, Value: body}); err != nil {
				http.Error(rw, err.Error(), http.StatusServiceUnavailable)
				return
			}
			rw.WriteHeader(http.StatusOK)
		})
		slog.Info("naive handler listening", "addr", ln.Addr().String())
		return sidebyside.Serve(ctx, ln, h)
	})
}
