// Package node runs a master node as squall master does: the master
// server with every API mounted on it (configuration and test events,
// versions, audit, findings, console and fleet, dead letters), the test
// events' action executors, the audit log file and, with a webhooks
// folder, the webhook intake. squall dev mounts the same APIs with
// MountAPIs and MountConsole.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/sighup"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/auditsink"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/intake"
)

// Config is a master node's settings.
type Config struct {
	// Master is the master server's; its Logger logs for every part.
	Master master.Config
	// Fleet is the fleet list's; CheckFleet checks it.
	Fleet fleet.Config
	// ActionsConfig is the file of the executors' settings for test
	// events sent with process_type Full; empty: logger and foreach only
	// (DESIGN decision 21).
	ActionsConfig string
	// FindingsKeyFile, when set, holds the key that encrypts findings'
	// passwords at rest.
	FindingsKeyFile string
	// AuditLog, when set, is the file this node appends the audit records
	// it applies to; SIGHUP reopens it (log rotation).
	AuditLog string
	// Hostname names export files.
	Hostname string
	// Intake is the webhook intake's: the node serves it when
	// Intake.Webhooks.Dir is set. Its Kafka settings (brokers, topic,
	// TLS and SASL) also reach the dead-letter API.
	Intake satellite.Config
	// DeadLetters is the dead-letter API's, served when Intake.Kafka
	// names brokers.
	DeadLetters deadletters.Config
	// Backtests is the backtests API's.
	Backtests backtests.Config
}

// Run runs a master node until ctx ends or the server stops.
func Run(ctx context.Context, cfg Config) (err error) {
	logger := cfg.Master.Logger
	if cfg.Master.AllowUnsignedTokens {
		logger.Warn("unsigned tokens are accepted (--allow-unsigned-tokens): anyone who reaches this node's HTTP address can claim any role; run it only behind an authenticating proxy")
	}
	// One registry serves the master's and the executors' metrics.
	reg := metricset.NewRegistry()
	cfg.Master.Registerer = reg
	srv, err := master.New(cfg.Master)
	if err != nil {
		return err
	}
	// Test events with process_type Full run their actions through the
	// engine's executors.
	actions, err := NewActions(cfg.ActionsConfig, logger, reg)
	if err != nil {
		return err
	}
	defer actions.Close()
	var sink *auditsink.Sink
	if cfg.AuditLog != "" {
		if sink, err = auditsink.New(auditsink.Config{Path: cfg.AuditLog, PosPath: auditsink.PosPath(cfg.Master.DataDir)}, srv.Store(), logger); err != nil {
			return err
		}
	}
	hangups := sighup.Reloader(logger, func(ctx context.Context) error {
		if sink != nil {
			sink.Reopen()
		}
		return actions.Reload(ctx)
	})
	apiCfg := api.Default()
	if cfg.Hostname != "" {
		apiCfg.Hostname = cfg.Hostname
	}
	// With a findings key, passwords are encrypted at rest.
	fcfg := findings.Default()
	if cfg.FindingsKeyFile != "" {
		if fcfg.Sealer, err = findings.LoadKey(cfg.FindingsKeyFile); err != nil {
			return err
		}
	}
	if err := MountAPIs(srv, apiCfg, fcfg, actions, logger); err != nil {
		return err
	}
	if err := CheckFleet(cfg.Fleet); err != nil {
		return err
	}
	if _, err := MountConsole(srv, console.Options{}, cfg.Fleet, reg, logger); err != nil {
		return err
	}
	followBacktests, err := MountBacktests(srv, cfg.Backtests, reg, logger)
	if err != nil {
		return err
	}
	// With brokers, the dead-letter API (docs/operations.md "Dead
	// letters").
	if len(cfg.Intake.Kafka.Brokers) > 0 {
		closeDL, mountErr := mountDeadLetters(srv, cfg.DeadLetters, cfg.Intake, reg, logger)
		if mountErr != nil {
			return fmt.Errorf("dead-letter API: %w", mountErr)
		}
		defer func() { err = errors.Join(err, closeDL()) }()
	}
	// The webhook intake of a master node: every node serves it and
	// forwards to Kafka like a satellite.
	var sat *satellite.Satellite
	if cfg.Intake.Webhooks.Dir != "" {
		cfg.Intake.HTTPAddr = ""
		if sat, err = satellite.New(cfg.Intake, logger.With("role", "intake"), reg); err != nil {
			return fmt.Errorf("webhook intake: %w", err)
		}
		if err := srv.Mount(intake.Pattern, sat.WebhookHandler(), master.OnAnyNode); err != nil {
			return err
		}
	}
	// The master's end ends the actions file's watch and the SIGHUP loop.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	if sat != nil {
		g.Go(func() error { return sat.Run(ctx) })
	}
	g.Go(func() error { defer stop(); return srv.Run(ctx) })
	g.Go(func() error {
		if err := actions.Watch(ctx); err != nil {
			logger.Error("the actions settings file is not watched: reload it with SIGHUP", "error", err)
		}
		return nil
	})
	g.Go(func() error { return hangups(ctx) })
	g.Go(func() error { return followBacktests(ctx) })
	if sink != nil {
		g.Go(func() error { return sink.Run(ctx) })
	}
	return g.Wait()
}

// NewActions builds the action executors of test events from a settings
// file, or from the defaults (logger and foreach only, DESIGN decision
// 21) when file is empty. Its Watch follows the file.
func NewActions(file string, logger *slog.Logger, reg prometheus.Registerer) (*action.Reloader, error) {
	return action.NewReloader(action.ReloaderConfig{File: file}, action.Deps{Logger: logger, Registerer: reg})
}

// MountAPIs mounts on srv the APIs of the replicated state: the
// configuration and test-event API, its versions and audit log on the
// leader, and the findings API on the leader for writes.
func MountAPIs(srv *master.Server, apiCfg api.Config, fcfg findings.Config, actions api.ActionRunner, logger *slog.Logger) error {
	if err := mountAPI(srv, api.New(apiCfg, srv.Store(), srv.Verifier(), actions, logger)); err != nil {
		return err
	}
	fa := findings.New(fcfg, srv.Store(), srv.Verifier(), logger)
	// An insert (PUT) deduplicates by content: sending it again after a
	// leader failed changes nothing more.
	return srv.Mount(findings.Prefix, fa.Handler(), master.OnLeaderWrite, master.IdempotentMethods(http.MethodPut), master.RequestIDs())
}

// mountAPI mounts the configuration and test-event API a on the leader,
// with its versions (history, diff, rollback), the draft tests API
// (api.DraftTestsPath), both with request ids, and its audit log.
func mountAPI(srv *master.Server, a *api.API) error {
	if err := srv.Mount(api.Prefix, a.Handler(), master.OnLeader, master.RequestIDs(api.StateWrite)); err != nil {
		return err
	}
	for root, h := range map[string]http.Handler{api.VersionsPath: a.VersionsHandler(srv.Store()), api.DraftTestsPath: a.DraftTestsHandler(srv.Store())} {
		for _, p := range []string{root, root + "/"} {
			if err := srv.Mount(p, h, master.OnLeader, master.RequestIDs()); err != nil {
				return err
			}
		}
	}
	return srv.Mount(api.AuditPath, a.AuditHandler(srv.Store()), master.OnLeader)
}
