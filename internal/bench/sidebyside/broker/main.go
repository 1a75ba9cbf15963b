// Command broker runs a one-node kfake Kafka broker in its own process until
// SIGINT or SIGTERM, with its topics created, for the side-by-side
// benchmarks (package sidebyside).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/internal/bench/sidebyside"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "file to write the address listened on into")
	partitions := flag.Int("partitions", 6, "partitions of each topic")
	topics := flag.String("topics", "squall.events,squall.events.dlq", "topics to create, comma-separated")
	flag.Parse()
	ctx, stop := sidebyside.SignalContext()
	defer stop()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *addr) }))
	if err != nil {
		return err
	}
	defer c.Close()
	a := c.ListenAddrs()[0]
	if err := sidebyside.WriteAddr(*addrFile, a); err != nil {
		return err
	}
	slog.Info("broker listening", "addr", a, "topics", *topics, "partitions", *partitions)
	<-ctx.Done()
	return nil
}
