// Command broker runs a one-node kfake Kafka broker in its own process until
// SIGINT or SIGTERM, with its topics created, for the side-by-side
// benchmarks (package sidebyside).
package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/internal/bench/sidebyside"
)

func main() {
	partitions := flag.Int("partitions", 6, "partitions of each topic")
	topics := flag.String("topics", "squall.events,squall.events.dlq", "topics to create, comma-separated")
	sidebyside.Main("broker", "listen address", func(ctx context.Context, addr, addrFile string) error {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...),
			kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }))
		if err != nil {
			return err
		}
		defer c.Close()
		a := c.ListenAddrs()[0]
		if err := sidebyside.WriteAddr(addrFile, a); err != nil {
			return err
		}
		slog.Info("broker listening", "addr", a, "topics", *topics, "partitions", *partitions)
		<-ctx.Done()
		return nil
	})
}
