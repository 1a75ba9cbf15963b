// Command bareconsumer is a consumer-group member that reads each record of
// a topic and decodes its JSON value with encoding/json, in one goroutine,
// committing every second, until SIGINT or SIGTERM: the floor an engine is
// compared to in the side-by-side benchmarks (package sidebyside). It serves
// /metrics with the engine's squall_engine_events_processed_total (the
// records decoded) and the process's CPU and memory, so that squall bench
// engine measures it as it measures an engine.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/bench/sidebyside"
	"github.com/squallhq/squall/internal/metricset"
)

func main() {
	brokers := flag.String("kafka-brokers", "", "Kafka broker, host:port (required)")
	topic := flag.String("topic", "squall.events", "topic to read")
	group := flag.String("group", "bareconsumer", "consumer group")
	sidebyside.Main("bareconsumer", "listen address of /metrics", func(ctx context.Context, addr, addrFile string) error {
		if *brokers == "" {
			return errors.New("--kafka-brokers is required")
		}
		reg := metricset.NewRegistry()
		processed := metricset.Counter("squall_engine_events_processed_total", "Records read and decoded.")
		failed := metricset.Counter("squall_engine_events_failed_total", "Records whose value is not JSON.")
		reg.MustRegister(processed, failed)

		ln, err := sidebyside.Listen(addr, addrFile)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()

		src, err := kafkasource.Open(kafkasource.SourceConfig{Dial: kafkasource.Dial{Brokers: []string{*brokers}}, Topic: *topic, Group: *group})
		if err != nil {
			return err
		}
		defer src.Close()
		slog.Info("bare consumer listening", "addr", ln.Addr().String())
		next := map[int]int64{}
		lastCommit := time.Now()
		commit := func() {
			ps := make([]kafkasource.Position, 0, len(next))
			for p, n := range next {
				ps = append(ps, kafkasource.Position{Partition: p, Next: n})
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := src.Commit(cctx, ps...); err != nil {
				slog.Warn("commit failed", "error", err)
			}
			lastCommit = time.Now()
		}
		for {
			m, err := src.Fetch(ctx)
			if err != nil {
				if ctx.Err() != nil {
					commit()
					return nil
				}
				return err
			}
			var v map[string]any
			if err := json.Unmarshal(m.Value(), &v); err != nil {
				failed.Inc()
			} else {
				processed.Inc()
			}
			next[m.Partition()] = m.Offset() + 1
			if time.Since(lastCommit) >= time.Second {
				commit()
			}
		}
	})
}
