package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/action"
)

// newActionReloader builds the action executors from a settings file, or
// from the defaults (logger and foreach only, DESIGN decision 21) when
// file is empty. Its Watch follows the file; onHangup reloads it.
func newActionReloader(file string, logger *slog.Logger, reg prometheus.Registerer) (*action.Reloader, error) {
	return action.NewReloader(action.ReloaderConfig{File: file}, action.Deps{Logger: logger, Registerer: reg})
}

// onHangup registers for SIGHUP at once (from then on the signal no longer
// ends the process) and returns a loop that calls reload at each SIGHUP
// until ctx ends. reload logs its own result.
func onHangup(logger *slog.Logger, reload func(context.Context) error) func(context.Context) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return func(ctx context.Context) error {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ch:
				logger.Info("SIGHUP: reloading the actions settings file")
				_ = reload(ctx)
			}
		}
	}
}
