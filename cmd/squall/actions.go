package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/action"
)

// newActionRegistry builds the action executors from a settings file, or
// from the defaults (logger and foreach only, DESIGN decision 21) when
// file is empty.
func newActionRegistry(file string, logger *slog.Logger, reg prometheus.Registerer) (*action.Registry, error) {
	cfg := action.Default()
	if file != "" {
		var err error
		if cfg, err = action.Load(file); err != nil {
			return nil, err
		}
	}
	return action.NewRegistry(cfg, action.Deps{Logger: logger, Registerer: reg})
}
