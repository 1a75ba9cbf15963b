package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/auditsink"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/store"
	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/intake"
)

func newMasterCommand() *cobra.Command {
	cfg := master.Default()
	fleetCfg := fleet.Default()
	var actionsConfig, findingsKey, saslPasswordFile, auditLog string
	intakeCfg := satellite.Default()
	var intakeBrokers []string
	var role roleOptions
	dlCfg := deadletters.Default()
	btCfg := backtests.Default()
	cmd := &cobra.Command{
		Use:   "master --node-id ID --data-dir DIR (--bootstrap | --join URL) [flags]",
		Short: "Run a master node: the replicated tree, the configuration API, the tree watch",
		Example: `  squall master --node-id m1 --data-dir /var/lib/squall --bootstrap --token-hmac-key-file /etc/squall/token.key
  squall master --node-id m2 --data-dir /var/lib/squall --join http://m1:8080 --token-hmac-key-file /etc/squall/token.key --join-token-file /etc/squall/join.token`,
		Long: `Master runs one node of the master cluster: the raft-replicated active tree and
draft, the v2_beta configuration and test-event API, the findings API
(/intel/api/sdk/v0, docs/findings.md), the cluster endpoints
(/squall/v1/cluster), the engines' tree watch (/squall/v1/tree/active), the
backtests the engines run (/squall/v1/backtests, squall backtest --master),
with --kafka-brokers the dead-letter API (/squall/v1/deadletters, squall
deadletters) and /healthz, /readyz, /metrics. Any node answers every request; requests that need
the leader are forwarded to it.

Form a cluster by starting the first node with --bootstrap and the others with
--join http://FIRST:8080; a restart from the data dir rejoins with its state.
Every join carries the cluster's join secret: --join-token-file on every node,
or, without it, the first node writes one to join.token in its data dir (and
logs the path) and the others get a copy with --join-token-file. New members
join as non-voters and become voters once they caught up. See
docs/operations.md.

API tokens are verified with --token-hmac-key-file (HS256) or
--token-ed25519-public-key-file (EdDSA); squall token mints them.
--allow-unsigned-tokens also accepts the spec's unsigned tokens (only behind an
authenticating proxy).

Every flag can also be set with an environment variable: SQUALL_ and the flag
name in upper case with underscores, e.g. SQUALL_NODE_ID for --node-id. A flag
given on the command line wins; empty variables are ignored.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return role.preRun(cmd, "node-id", "data-dir") },
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			logger, tr, stopRole, err := role.start(cmd)
			if err != nil {
				return err
			}
			// The spans left are exported once the role stopped.
			defer func() { err = errors.Join(err, stopRole()) }()
			if err := readSASLPassword(&intakeCfg.Kafka.SASL, saslPasswordFile); err != nil {
				return err
			}
			cfg.TracerProvider = tr.TracerProvider()
			intakeCfg.TracerProvider = tr.TracerProvider()
			cfg.Logger = logger
			cfg.Version = versionString()
			if cfg.AllowUnsignedTokens {
				logger.Warn("unsigned tokens are accepted (--allow-unsigned-tokens): anyone who reaches this node's HTTP address can claim any role; run it only behind an authenticating proxy")
			}
			// One registry serves the master's and the executors' metrics.
			reg := metricset.NewRegistry()
			cfg.Registerer = reg
			srv, err := master.New(cfg)
			if err != nil {
				return err
			}
			// Test events with process_type Full run their actions through
			// the engine's executors; without --actions-config only logger
			// and foreach are enabled (DESIGN decision 21).
			actions, err := newActionReloader(actionsConfig, logger, reg)
			if err != nil {
				return err
			}
			defer actions.Close()
			// With --audit-log, this node appends the audit records it
			// applies to a file; SIGHUP reopens it (log rotation).
			var sink *auditsink.Sink
			if auditLog != "" {
				if sink, err = auditsink.New(auditsink.Config{Path: auditLog, PosPath: auditsink.PosPath(cfg.DataDir)}, srv.Store(), logger); err != nil {
					return err
				}
			}
			hangups := onHangup(logger, func(ctx context.Context) error {
				if sink != nil {
					sink.Reopen()
				}
				return actions.Reload(ctx)
			})
			// The configuration and test-event API runs on the leader.
			apiCfg := api.Default()
			if host, err := os.Hostname(); err == nil && host != "" {
				apiCfg.Hostname = host // names export files
			}
			a := api.New(apiCfg, srv.Store(), srv.Verifier(), actions, logger)
			if err := srv.Mount(api.Prefix, a.Handler(), master.OnLeader, master.RequestIDs(api.StateWrite)); err != nil {
				return err
			}
			if err := mountVersions(srv, a); err != nil {
				return err
			}
			if err := mountAudit(srv, a); err != nil {
				return err
			}
			// The findings API runs on the leader too; with --findings-key
			// passwords are encrypted at rest.
			fcfg := findings.Default()
			if findingsKey != "" {
				if fcfg.Sealer, err = findings.LoadKey(findingsKey); err != nil {
					return err
				}
			}
			fa := findings.New(fcfg, srv.Store(), srv.Verifier(), logger)
			// An insert (PUT) deduplicates by content: sending it again
			// after a leader failed changes nothing more.
			if err := srv.Mount(findings.Prefix, fa.Handler(), master.OnLeaderWrite, master.IdempotentMethods(http.MethodPut), master.RequestIDs()); err != nil {
				return err
			}
			if err := checkFleetList(fleetCfg); err != nil {
				return err
			}
			if _, err := mountConsole(srv, console.Options{}, fleetCfg, reg, logger); err != nil {
				return err
			}
			followBacktests, err := mountBacktests(srv, btCfg, reg, logger)
			if err != nil {
				return err
			}
			// With brokers, the dead-letter API (docs/operations.md "Dead
			// letters").
			if len(intakeBrokers) > 0 {
				k := intakeCfg.Kafka
				k.Brokers = splitList(intakeBrokers)
				closeDL, mountErr := mountDeadLetters(srv, dlCfg, k, reg, logger)
				if mountErr != nil {
					return fmt.Errorf("dead-letter API: %w", mountErr)
				}
				defer func() { err = errors.Join(err, closeDL()) }()
			}
			// The webhook intake of a master node: every node serves it and
			// forwards to Kafka like a satellite.
			var sat *satellite.Satellite
			if intakeCfg.Webhooks.Dir != "" {
				intakeCfg.HTTPAddr = ""
				intakeCfg.Kafka.Brokers = splitList(intakeBrokers)
				if sat, err = satellite.New(intakeCfg, logger.With("role", "intake"), reg); err != nil {
					return fmt.Errorf("webhook intake: %w", err)
				}
				if err := srv.Mount(intake.Pattern, sat.WebhookHandler(), master.OnAnyNode); err != nil {
					return err
				}
			}
			// The master's end ends the actions file's watch and the
			// SIGHUP loop.
			ctx, stop := context.WithCancel(cmd.Context())
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
		},
	}
	f := cmd.Flags()
	fleetListFlags(f, &fleetCfg)
	f.StringVar(&cfg.NodeID, "node-id", "", "this node's id, unique in the cluster for all time (required)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory of the replicated state and the raft log (required)")
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address (port 0 picks a free port, logged at start)")
	f.StringVar(&cfg.HTTPAdvertise, "http-advertise", "", "host:port other masters use to reach this node's HTTP API (default: the listen address if it is a specific IP, else the raft advertise host)")
	f.StringVar(&cfg.RaftAddr, "raft", cfg.RaftAddr, "raft listen address")
	f.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "host:port other masters dial for raft (default: the listen address, which must then be a specific IP)")
	f.StringVar(&cfg.RaftSourceIP, "raft-source-ip", "", "local IP that outbound raft connections come from, for peers that filter raft traffic by source (default: chosen by the system)")
	f.BoolVar(&cfg.Bootstrap, "bootstrap", false, "form a new cluster with this node as its first voter (ignored when the data dir holds state)")
	f.StringSliceVar(&cfg.JoinURLs, "join", nil, "HTTP URL of a member to join through, e.g. http://10.0.0.1:8080 (repeatable or comma-separated)")
	f.StringVar(&cfg.JoinTokenFile, "join-token-file", "", "file holding the cluster's join secret, which every join request carries (at least 16 bytes); default: join.token in the data dir, generated by a node that bootstraps")
	f.StringVar(&cfg.RaftTLS.CertFile, "raft-tls-cert", "", "PEM certificate of this master for mutual TLS on the raft port")
	f.StringVar(&cfg.RaftTLS.KeyFile, "raft-tls-key", "", "PEM key of --raft-tls-cert")
	f.StringVar(&cfg.RaftTLS.CAFile, "raft-tls-ca", "", "PEM CA that signs the masters' certificates")
	f.StringVar(&cfg.RaftTLS.ServerName, "raft-tls-server-name", "", "name every master's certificate carries (default: the dialled host)")
	f.StringVar(&cfg.TokenHMACKeyFile, "token-hmac-key-file", "", "HS256 key file that verifies API tokens")
	f.StringVar(&cfg.TokenEd25519PublicKeyFile, "token-ed25519-public-key-file", "", "Ed25519 public key (PEM) that verifies API tokens")
	f.BoolVar(&cfg.AllowUnsignedTokens, "allow-unsigned-tokens", false, "also accept unsigned base64 JSON tokens (behind an authenticating proxy only)")
	f.DurationVar(&cfg.LeaderWait, "leader-wait", cfg.LeaderWait, "how long a request waits for a leader during an election before it is answered 503")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long a graceful shutdown waits for running requests")
	f.DurationVar(&cfg.TransferTimeout, "transfer-timeout", cfg.TransferTimeout, "how long a leader that shuts down waits for another node to take the leadership over before it stops anyway")
	f.DurationVar(&cfg.ForwardDialTimeout, "forward-dial-timeout", cfg.ForwardDialTimeout, "how long a follower tries to connect to the leader before it looks for the leader again and retries")
	f.DurationVar(&cfg.RaftHeartbeatTimeout, "raft-heartbeat-timeout", store.DefaultHeartbeatTimeout, "how long a follower hears nothing from the leader before it starts an election (raft waits one to two of it); the largest part of a failover")
	f.DurationVar(&cfg.RaftElectionTimeout, "raft-election-timeout", store.DefaultElectionTimeout, "how long a candidate waits for votes before it starts a new election; at least --raft-heartbeat-timeout")
	f.DurationVar(&cfg.RaftLeaderLeaseTimeout, "raft-leader-lease-timeout", store.DefaultLeaderLeaseTimeout, "how long a leader stays leader without hearing from a quorum; at most --raft-heartbeat-timeout")
	f.IntVar(&cfg.KeepVersions, "keep-versions", store.DefaultKeepVersions, "how many versions of the active tree (one per deploy or rollback) the cluster keeps; the leader's setting applies to each new version")
	f.IntVar(&cfg.AuditKeep, "audit-keep", store.DefaultAuditKeep, "how many audit records (one per change of the replicated state) the cluster keeps; the leader's setting applies with each new record")
	f.DurationVar(&cfg.AuditMaxAge, "audit-max-age", 0, "how old audit records may grow before they are pruned (e.g. 2160h for 90 days; 0: no limit, --audit-keep alone bounds them); the leader's setting applies with each new record")
	f.StringVar(&auditLog, "audit-log", "", "file this node appends the audit records it applies to, one JSON object a line (mode 0600), for shipping to a SIEM; every node writes its own copy; SIGHUP reopens it (log rotation)")
	f.DurationVar(&cfg.RaftCommitTimeout, "raft-commit-timeout", store.DefaultCommitTimeout, "how long an idle leader waits before it tells the followers the commit index; at most --raft-heartbeat-timeout")
	role.define(f, tracing.ServiceMaster)
	f.StringVar(&intakeCfg.Webhooks.Dir, "webhooks-dir", "", "folder of webhook files: this node also serves the webhook intake (needs --kafka-brokers and --spool-dir)")
	f.StringSliceVar(&intakeBrokers, "kafka-brokers", nil, "Kafka brokers of the webhook intake and of the dead-letter API, host:port (repeatable or comma-separated)")
	deadLetterFlags(f, &dlCfg)
	backtestListFlags(f, &btCfg)
	f.StringVar(&intakeCfg.Kafka.Topic, "topic", intakeCfg.Kafka.Topic, "Kafka topic of the webhook intake's events")
	f.StringVar(&intakeCfg.Spool.Dir, "spool-dir", "", "folder of the webhook intake's durable spool")
	f.StringVar(&intakeCfg.TenantID, "tenant-id", intakeCfg.TenantID, "tenant of webhook events whose file names none")
	intakeFlags(f, &intakeCfg, &saslPasswordFile)
	f.StringVar(&actionsConfig, "actions-config", "", "action executors' settings (JSON) for test events sent with process_type Full; without it only logger and foreach run; reloaded when the file changes and on SIGHUP (a bad file is logged and the current settings stay)")
	f.StringVar(&findingsKey, "findings-key", "", "file of 64 hex characters (32 bytes): encrypt findings' passwords at rest with AES-256-GCM (the same key on every master); without it they are stored in clear")
	documentEnv(f)
	return cmd
}

// mountAudit mounts the audit log's API (api.AuditPath) on the leader.
func mountAudit(srv *master.Server, a *api.API) error {
	return srv.Mount(api.AuditPath, a.AuditHandler(srv.Store()), master.OnLeader)
}

// mountVersions mounts the versions API of a (api.VersionsPath: history,
// diff, rollback) and the draft tests API (api.DraftTestsPath) on the
// leader, with request ids.
func mountVersions(srv *master.Server, a *api.API) error {
	for root, h := range map[string]http.Handler{api.VersionsPath: a.VersionsHandler(srv.Store()), api.DraftTestsPath: a.DraftTestsHandler(srv.Store())} {
		for _, p := range []string{root, root + "/"} {
			if err := srv.Mount(p, h, master.OnLeader, master.RequestIDs()); err != nil {
				return err
			}
		}
	}
	return nil
}
