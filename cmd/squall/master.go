package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/node"
	"github.com/squallhq/squall/master/store"
	"github.com/squallhq/squall/satellite"
)

func newMasterCommand() *cobra.Command {
	cfg := node.Config{Master: master.Default(), Fleet: fleet.Default(), Intake: satellite.Default(), DeadLetters: deadletters.Default(),
		Backtests: backtests.Default()}
	var saslPasswordFile string
	var intakeBrokers []string
	var role roleOptions
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
			if err := readSASLPassword(&cfg.Intake.Kafka.SASL, saslPasswordFile); err != nil {
				return err
			}
			cfg.Master.TracerProvider = tr.TracerProvider()
			cfg.Intake.TracerProvider = tr.TracerProvider()
			cfg.Master.Logger = logger
			cfg.Master.Version = versionString()
			if host, err := os.Hostname(); err == nil {
				cfg.Hostname = host // names export files
			}
			cfg.Intake.Kafka.Brokers = splitList(intakeBrokers)
			return node.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	fleetListFlags(f, &cfg.Fleet)
	f.StringVar(&cfg.Master.NodeID, "node-id", "", "this node's id, unique in the cluster for all time (required)")
	f.StringVar(&cfg.Master.DataDir, "data-dir", "", "directory of the replicated state and the raft log (required)")
	f.StringVar(&cfg.Master.HTTPAddr, "http", cfg.Master.HTTPAddr, "HTTP listen address (port 0 picks a free port, logged at start)")
	f.StringVar(&cfg.Master.HTTPAdvertise, "http-advertise", "", "host:port other masters use to reach this node's HTTP API (default: the listen address if it is a specific IP, else the raft advertise host)")
	f.StringVar(&cfg.Master.RaftAddr, "raft", cfg.Master.RaftAddr, "raft listen address")
	f.StringVar(&cfg.Master.RaftAdvertise, "raft-advertise", "", "host:port other masters dial for raft (default: the listen address, which must then be a specific IP)")
	f.StringVar(&cfg.Master.RaftSourceIP, "raft-source-ip", "", "local IP that outbound raft connections come from, for peers that filter raft traffic by source (default: chosen by the system)")
	f.BoolVar(&cfg.Master.Bootstrap, "bootstrap", false, "form a new cluster with this node as its first voter (ignored when the data dir holds state)")
	f.StringSliceVar(&cfg.Master.JoinURLs, "join", nil, "HTTP URL of a member to join through, e.g. http://10.0.0.1:8080 (repeatable or comma-separated)")
	f.StringVar(&cfg.Master.JoinTokenFile, "join-token-file", "", "file holding the cluster's join secret, which every join request carries (at least 16 bytes); default: join.token in the data dir, generated by a node that bootstraps")
	f.StringVar(&cfg.Master.RaftTLS.CertFile, "raft-tls-cert", "", "PEM certificate of this master for mutual TLS on the raft port")
	f.StringVar(&cfg.Master.RaftTLS.KeyFile, "raft-tls-key", "", "PEM key of --raft-tls-cert")
	f.StringVar(&cfg.Master.RaftTLS.CAFile, "raft-tls-ca", "", "PEM CA that signs the masters' certificates")
	f.StringVar(&cfg.Master.RaftTLS.ServerName, "raft-tls-server-name", "", "name every master's certificate carries (default: the dialled host)")
	f.StringVar(&cfg.Master.TokenHMACKeyFile, "token-hmac-key-file", "", "HS256 key file that verifies API tokens")
	f.StringVar(&cfg.Master.TokenEd25519PublicKeyFile, "token-ed25519-public-key-file", "", "Ed25519 public key (PEM) that verifies API tokens")
	f.BoolVar(&cfg.Master.AllowUnsignedTokens, "allow-unsigned-tokens", false, "also accept unsigned base64 JSON tokens (behind an authenticating proxy only)")
	f.DurationVar(&cfg.Master.LeaderWait, "leader-wait", cfg.Master.LeaderWait, "how long a request waits for a leader during an election before it is answered 503")
	f.DurationVar(&cfg.Master.ShutdownTimeout, "shutdown-timeout", cfg.Master.ShutdownTimeout, "how long a graceful shutdown waits for running requests")
	f.DurationVar(&cfg.Master.TransferTimeout, "transfer-timeout", cfg.Master.TransferTimeout, "how long a leader that shuts down waits for another node to take the leadership over before it stops anyway")
	f.DurationVar(&cfg.Master.ForwardDialTimeout, "forward-dial-timeout", cfg.Master.ForwardDialTimeout, "how long a follower tries to connect to the leader before it looks for the leader again and retries")
	f.DurationVar(&cfg.Master.RaftHeartbeatTimeout, "raft-heartbeat-timeout", store.DefaultHeartbeatTimeout, "how long a follower hears nothing from the leader before it starts an election (raft waits one to two of it); the largest part of a failover")
	f.DurationVar(&cfg.Master.RaftElectionTimeout, "raft-election-timeout", store.DefaultElectionTimeout, "how long a candidate waits for votes before it starts a new election; at least --raft-heartbeat-timeout")
	f.DurationVar(&cfg.Master.RaftLeaderLeaseTimeout, "raft-leader-lease-timeout", store.DefaultLeaderLeaseTimeout, "how long a leader stays leader without hearing from a quorum; at most --raft-heartbeat-timeout")
	f.IntVar(&cfg.Master.KeepVersions, "keep-versions", store.DefaultKeepVersions, "how many versions of the active tree (one per deploy or rollback) the cluster keeps; the leader's setting applies to each new version")
	f.IntVar(&cfg.Master.AuditKeep, "audit-keep", store.DefaultAuditKeep, "how many audit records (one per change of the replicated state) the cluster keeps; the leader's setting applies with each new record")
	f.DurationVar(&cfg.Master.AuditMaxAge, "audit-max-age", 0, "how old audit records may grow before they are pruned (e.g. 2160h for 90 days; 0: no limit, --audit-keep alone bounds them); the leader's setting applies with each new record")
	f.StringVar(&cfg.AuditLog, "audit-log", "", "file this node appends the audit records it applies to, one JSON object a line (mode 0600), for shipping to a SIEM; every node writes its own copy; SIGHUP reopens it (log rotation)")
	f.DurationVar(&cfg.Master.RaftCommitTimeout, "raft-commit-timeout", store.DefaultCommitTimeout, "how long an idle leader waits before it tells the followers the commit index; at most --raft-heartbeat-timeout")
	role.define(f, tracing.ServiceMaster)
	f.StringVar(&cfg.Intake.Webhooks.Dir, "webhooks-dir", "", "folder of webhook files: this node also serves the webhook intake (needs --kafka-brokers and --spool-dir)")
	f.StringSliceVar(&intakeBrokers, "kafka-brokers", nil, "Kafka brokers of the webhook intake and of the dead-letter API, host:port (repeatable or comma-separated)")
	deadLetterFlags(f, &cfg.DeadLetters)
	backtestListFlags(f, &cfg.Backtests)
	f.StringVar(&cfg.Intake.Kafka.Topic, "topic", cfg.Intake.Kafka.Topic, "Kafka topic of the webhook intake's events")
	f.StringVar(&cfg.Intake.Spool.Dir, "spool-dir", "", "folder of the webhook intake's durable spool")
	f.StringVar(&cfg.Intake.TenantID, "tenant-id", cfg.Intake.TenantID, "tenant of webhook events whose file names none")
	intakeFlags(f, &cfg.Intake, &saslPasswordFile)
	f.StringVar(&cfg.ActionsConfig, "actions-config", "", "action executors' settings (JSON) for test events sent with process_type Full; without it only logger and foreach run; reloaded when the file changes and on SIGHUP (a bad file is logged and the current settings stay)")
	f.StringVar(&cfg.FindingsKeyFile, "findings-key", "", "file of 64 hex characters (32 bytes): encrypt findings' passwords at rest with AES-256-GCM (the same key on every master); without it they are stored in clear")
	documentEnv(f)
	return cmd
}
