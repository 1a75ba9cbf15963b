package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/dev"
	"github.com/squallhq/squall/engine"
)

func newBrokerCommand() *cobra.Command {
	var (
		addr, dataDir, logLevel string
		partitions              int32
		topics                  []string
	)
	cmd := &cobra.Command{
		Use:   "broker [--addr HOST:PORT] [--data-dir DIR]",
		Short: "Run the in-process Kafka-protocol broker alone, for local trials",
		Long: `Broker runs the Kafka-protocol broker that squall dev embeds, alone: one
broker on --addr (default 127.0.0.1:9093) with the events topic and the dead
letter topic created, for a local trial of masters, satellites and engines
started apart (docs/install.md, "A cluster on one machine"). With --data-dir
the topics are kept there across restarts; without it they live in memory.

It is a test broker: no authentication, no TLS, no replication, and it keeps
every record. Never expose its address; use Kafka in production.

It logs "broker started" with the address and runs until Ctrl-C or SIGTERM.

Every flag can also be set with an environment variable: SQUALL_ and the
flag name in upper case with underscores, e.g. SQUALL_ADDR.`,
		Example: `  squall broker
  squall broker --addr 127.0.0.1:0 --data-dir kafka-data --partitions 4`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			if partitions < 1 {
				return fmt.Errorf("--partitions %d: want at least 1", partitions)
			}
			b, err := dev.ListenBroker(addr, dataDir, partitions, splitList(topics))
			if err != nil {
				return err
			}
			defer b.Close()
			logger.Info("broker started", "addr", b.ListenAddrs()[0], "topics", splitList(topics), "partitions", partitions, "data_dir", dataDir)
			<-cmd.Context().Done()
			logger.Info("broker stopping")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", dev.DefaultKafkaAddr, "listen address (port 0 picks a free port, logged at start)")
	f.StringVar(&dataDir, "data-dir", "", "directory that keeps the topics across restarts (default: in memory)")
	f.Int32Var(&partitions, "partitions", 1, "partitions of each topic created")
	f.StringSliceVar(&topics, "topics", []string{engine.DefaultTopic, engine.DefaultDLQTopic}, "topics to create (comma-separated)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	documentEnv(f)
	return cmd
}
