package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/master/backtests"
)

// engineBacktestFlags are an engine's settings of the backtests it runs
// for the masters.
type engineBacktestFlags struct {
	maxRunning int
	rate, cpu  float64
	maxLag     int64
}

// defaultBacktestCPU is the share of one core a backtest uses by default
// on an engine, and defaultBacktestMaxLag the growth of the consumer lag
// that holds it: the live pipeline keeps priority.
const (
	defaultBacktestCPU    = 0.5
	defaultBacktestMaxLag = 1000
)

func (o *engineBacktestFlags) define(f *pflag.FlagSet) {
	f.IntVar(&o.maxRunning, "backtest-max-running", 1, "backtests (POST /squall/v1/backtests) this engine runs at once for the masters, outside its consumer group (0: none)")
	f.Float64Var(&o.rate, "backtest-rate", 0, "events per second one backtest reads at most (0: no bound but --backtest-cpu)")
	f.Float64Var(&o.cpu, "backtest-cpu", defaultBacktestCPU, "share of one core one backtest uses at most, measured on its thread (0 < x ≤ 1; 1: a whole core); the live pipeline keeps the rest")
	f.Int64Var(&o.maxLag, "backtest-max-lag", defaultBacktestMaxLag, "hold a backtest while this engine's consumer lag is more than this many events above its lowest since the backtest started (0: never hold)")
}

// worker returns the engine's backtest worker, or nil when it runs none.
func (o *engineBacktestFlags) worker(cfg engine.Config, id string, lag func() (int64, bool), logger *slog.Logger) (*backtests.Worker, error) {
	switch {
	case o.maxRunning < 0:
		return nil, fmt.Errorf("--backtest-max-running %d: want 0 or more", o.maxRunning)
	case o.rate < 0:
		return nil, fmt.Errorf("--backtest-rate %g: want 0 or more", o.rate)
	case o.maxLag < 0:
		return nil, fmt.Errorf("--backtest-max-lag %d: want 0 or more", o.maxLag)
	case o.cpu <= 0 || o.cpu > 1:
		return nil, fmt.Errorf("--backtest-cpu %g: want a share of one core, above 0 and at most 1", o.cpu)
	case o.maxRunning == 0:
		logger.Info("backtests off (--backtest-max-running 0): this engine runs none for the masters")
		return nil, nil
	}
	reader, err := kafkasource.NewReader(kafkasource.Dial{Brokers: cfg.Brokers, ClientID: "squall-engine-backtest", TLS: cfg.TLS, SASL: cfg.SASL})
	if err != nil {
		return nil, err
	}
	return backtests.NewWorker(backtests.WorkerConfig{MasterURLs: cfg.MasterURLs, Token: cfg.Token, Client: cfg.MasterClient, Engine: id,
		Topic: cfg.Topic, Reader: reader, MaxRunning: o.maxRunning, Rate: o.rate, CPU: o.cpu, Lag: lag, MaxLagGrowth: o.maxLag, Logger: logger})
}

// runWorker runs w until ctx ends; a nil w waits for ctx.
func runWorker(ctx context.Context, w *backtests.Worker) error {
	if w == nil {
		<-ctx.Done()
		return nil
	}
	return w.Run(ctx)
}
