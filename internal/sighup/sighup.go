// Package sighup reloads a process's settings on SIGHUP.
package sighup

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Reloader registers for SIGHUP at once (from then on the signal no
// longer ends the process) and returns a loop that calls reload at each
// SIGHUP until ctx ends. reload logs its own result.
func Reloader(logger *slog.Logger, reload func(context.Context) error) func(context.Context) error {
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
