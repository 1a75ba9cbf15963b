package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/fleet/heartbeat"
	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/tlscert"
)

func newSatelliteCommand() *cobra.Command {
	cfg := satellite.Default()
	var brokers, masters []string
	var saslPasswordFile, tlsCertFile, tlsKeyFile, masterTokenFile, masterCAFile string
	var fl fleetFlags
	var role roleOptions
	cmd := &cobra.Command{
		Use:   "satellite --webhooks-dir DIR --kafka-brokers HOST:PORT[,...] --spool-dir DIR",
		Short: "Run a satellite: webhook endpoints that forward events to Kafka",
		Example: `  squall satellite --webhooks-dir /etc/squall/webhooks --kafka-brokers kafka-1:9092 --spool-dir /var/lib/squall/spool
  squall satellite --webhooks-dir webhooks --kafka-brokers 127.0.0.1:9093 --spool-dir spool --http 127.0.0.1:8081 --master http://127.0.0.1:8080 --master-token-file satellite.token`,
		Long: `Satellite serves one endpoint per webhook file of --webhooks-dir
(POST /engine/webhook/event/{id}?token=...), turns each call into an event and
forwards it to Kafka. A call is answered 200 only once Kafka acknowledged the
event or it is safely written to the local spool (--spool-dir), which drains
to Kafka in order when the brokers are back: no accepted event is lost.

The folder is watched: adding, changing or removing a file changes the
endpoints within a second, and a broken file never takes the others down.
A webhook file may also deduplicate repeated deliveries ("dedupe": the ids
are kept in dedupe.db in --spool-dir, across restarts), limit the rate of
calls ("rate_limit": 429 with Retry-After) and the addresses that may call
("allow_ips"). Behind a reverse proxy, --trusted-proxies names the proxies
whose X-Forwarded-For (or Forwarded) header gives the client address.
/healthz, /readyz and /metrics are served on the same address.

Memory stays bounded when Kafka is slow or a flood of calls comes: past
--max-connections open connections, --max-calls calls in progress or
--max-pending-bytes of bodies and events waiting for Kafka, a call is
answered 503 OVERLOADED with Retry-After (docs/operations.md, "Bounds of
the intake").

With --master (one or more) and --master-token-file (a token with
fleet_report on the root, e.g. squall token --auth fleet=root:fleet_report),
the satellite tells the masters every --fleet-interval its id (--name), --site,
version, readiness, spool depth and webhooks loaded, shown in their fleet
list (GET /squall/v1/fleet, the console's Fleet tab). The heartbeat runs on
its own: a master that fails is skipped, and failures only delay the next
heartbeat (logged once, then once a minute); webhook calls never wait for it.

With --tls-cert-file and --tls-key-file that address serves HTTPS (TLS 1.2
or later, HTTP/1.1 only: the satellite's server offers no HTTP/2) instead of
plain HTTP. The files are checked every ten
seconds: a rotated pair is served from the next handshake on, and a pair
that does not load leaves the previous one in place (logged).

Every flag can also be set with an environment variable: SQUALL_ and the flag
name in upper case with underscores, e.g. SQUALL_KAFKA_BROKERS. A flag given
on the command line wins; empty variables are ignored.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return role.preRun(cmd)
		},
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			logger, tr, stopRole, err := role.start(cmd)
			if err != nil {
				return err
			}
			// The spans left are exported once the role stopped.
			defer func() { err = errors.Join(err, stopRole()) }()
			tuneGC(logger)
			if (tlsCertFile == "") != (tlsKeyFile == "") {
				return fmt.Errorf("--tls-cert-file and --tls-key-file (or SQUALL_TLS_CERT_FILE and SQUALL_TLS_KEY_FILE) go together: set both or neither")
			}
			if err := requireFlags(cmd, "webhooks-dir", "kafka-brokers", "spool-dir"); err != nil {
				return err
			}
			if tlsCertFile != "" {
				certs, err := tlscert.Load(tlsCertFile, tlsKeyFile, tlscert.Options{CheckInterval: tlscert.DefaultCheckInterval, Logger: logger})
				if err != nil {
					return err
				}
				cfg.TLS = certs.TLSConfig()
			}
			cfg.Kafka.Brokers = splitList(brokers)
			if err := readSASLPassword(&cfg.Kafka.SASL, saslPasswordFile); err != nil {
				return err
			}
			reg := metricset.NewRegistry()
			var s *satellite.Satellite
			reporter, err := satelliteReporter(&fl, cfg.Name, splitList(masters), masterTokenFile, masterCAFile, logger, reg,
				func() satellite.Status { return s.Status() })
			if err != nil {
				return err
			}
			cfg.TracerProvider = tr.TracerProvider()
			if s, err = satellite.New(cfg, logger, reg); err != nil {
				return err
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			g, ctx := errgroup.WithContext(ctx)
			g.Go(func() error { defer stop(); return s.Run(ctx) })
			g.Go(func() error { return runReporter(ctx, reporter) })
			return g.Wait()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Webhooks.Dir, "webhooks-dir", "", "folder of webhook JSON files, watched for changes (required)")
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address of the webhook endpoints and the probes (HTTPS with --tls-cert-file)")
	f.StringVar(&tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) to serve HTTPS with; reloaded when the file changes")
	f.StringVar(&tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file; reloaded with it")
	f.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", cfg.MaxHeaderBytes, "bound of a request's line and headers on --http, in bytes (4096 to 1048576); larger ones are answered 431")
	f.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "connections open at once on --http; one more is answered 503 OVERLOADED with Retry-After and closed")
	f.StringSliceVar(&brokers, "kafka-brokers", nil, "Kafka bootstrap brokers, host:port (repeatable or comma-separated; required)")
	f.StringVar(&cfg.Kafka.Topic, "topic", cfg.Kafka.Topic, "Kafka topic of the events")
	f.StringVar(&cfg.TenantID, "tenant-id", cfg.TenantID, "tenant of events whose webhook file names none")
	f.StringVar(&cfg.Name, "name", "", "this satellite's name in the squall-source header (default: the host name)")
	f.StringVar(&cfg.Spool.Dir, "spool-dir", "", "folder of the durable local spool (required)")
	intakeFlags(f, &cfg, &saslPasswordFile)
	f.StringSliceVar(&masters, "master", nil, "base URL of a master to send the fleet heartbeat to, http://host:port (repeatable or comma-separated; none: no heartbeat)")
	f.StringVar(&masterTokenFile, "master-token-file", "", "file holding the token of the fleet heartbeat, with fleet_report on the root (required with --master)")
	f.StringVar(&masterCAFile, "master-ca-file", "", "PEM CA of the masters' HTTPS certificates (default: the system's)")
	fl.define(f, false)
	role.define(f, tracing.ServiceSatellite)
	documentEnv(f)
	return cmd
}

// satelliteReporter returns the fleet heartbeat reporter of a satellite,
// or nil without --master. Its id is the satellite's --name (the host
// name by default).
func satelliteReporter(fl *fleetFlags, name string, masters []string, tokenFile, caFile string, logger *slog.Logger, reg prometheus.Registerer, status func() satellite.Status) (*fleet.Reporter, error) {
	if len(masters) == 0 {
		if tokenFile != "" {
			return nil, errors.New("--master-token-file without --master: give the masters to report to")
		}
		logger.Info("no --master: the masters' fleet list will not show this satellite")
		return nil, nil
	}
	if tokenFile == "" {
		return nil, errors.New("--master needs --master-token-file (a token with fleet_report on the root)")
	}
	token, err := readTokenFile("master-token-file", tokenFile)
	if err != nil {
		return nil, err
	}
	var client *http.Client
	if caFile != "" {
		if client, err = clientWithCA(caFile); err != nil {
			return nil, fmt.Errorf("--master-ca-file: %w", err)
		}
	}
	fl.name = name
	id, err := fl.id()
	if err != nil {
		return nil, err
	}
	return fl.reporter(masters, token, client, logger, reg, func() fleet.Report { return heartbeat.Satellite(id, fl.site, versionString(), status()) })
}

// intakeFlags defines the flags of the webhook intake's spool and Kafka
// connection, shared by squall satellite and squall master.
func intakeFlags(f *pflag.FlagSet, cfg *satellite.Config, saslPasswordFile *string) {
	f.Int64Var(&cfg.Spool.MaxBytes, "spool-max-bytes", cfg.Spool.MaxBytes, "spool size above which calls are answered 503")
	f.DurationVar(&cfg.AckTimeout, "ack-timeout", cfg.AckTimeout, "how long a call waits for Kafka before its event is spooled instead")
	f.StringVar(&cfg.Kafka.Compression, "kafka-compression", cfg.Kafka.Compression, "none, gzip, snappy, lz4 or zstd")
	kafkaClientFlags(f, &cfg.Kafka.TLS, &cfg.Kafka.SASL, saslPasswordFile)
	trustedProxyFlags(f, cfg)
	intakeBoundFlags(f, cfg)
	f.IntVar(&cfg.DedupeMaxEntries, "dedupe-max-entries", cfg.DedupeMaxEntries, "delivery ids remembered for the webhooks' dedupe (dedupe.db in the spool folder, about 60 bytes of memory and 65 of file each); past it the oldest are forgotten")
	f.IntVar(&cfg.RateLimitMaxClients, "rate-limit-max-clients", cfg.RateLimitMaxClients, "client addresses tracked for the webhooks' per-client rate limits (about 250 bytes each); past it the least recently seen are forgotten")
}

// trustedProxyFlags defines the flags of the proxies whose forwarding
// headers give the webhook calls' client addresses (squall satellite,
// master and dev).
func trustedProxyFlags(f *pflag.FlagSet, cfg *satellite.Config) {
	f.Var((*prefixesValue)(&cfg.TrustedProxies), "trusted-proxies", "CIDR prefixes or addresses of the reverse proxies whose forwarding header (--trusted-proxy-header) gives the client address of webhook calls, for allow_ips and per-client rate limits (repeatable or comma-separated; default: trust nobody, the peer is the client)")
	f.StringVar(&cfg.TrustedProxyHeader, "trusted-proxy-header", cfg.TrustedProxyHeader, "the header the trusted proxies set: X-Forwarded-For or Forwarded (the rightmost address that is not a trusted proxy is the client)")
}

// intakeBoundFlags defines the bounds of the webhook calls in progress
// (squall satellite, master and dev).
func intakeBoundFlags(f *pflag.FlagSet, cfg *satellite.Config) {
	f.IntVar(&cfg.MaxCalls, "max-calls", cfg.MaxCalls, "webhook calls handled at once; one more is answered 503 OVERLOADED with Retry-After, its body unread")
	f.Int64Var(&cfg.MaxPendingBytes, "max-pending-bytes", cfg.MaxPendingBytes, "bytes of bodies and events the webhook calls in progress hold until Kafka acknowledges or the spool takes them (at least 1048576); a call that would go over is answered 503 OVERLOADED with Retry-After")
}

// prefixesValue is a flag of CIDR prefixes, repeatable or comma-separated.
type prefixesValue []netip.Prefix

// Set implements pflag.Value; each use adds to the list.
func (v *prefixesValue) Set(s string) error {
	p, err := clientaddr.ParsePrefixes(strings.Split(s, ","))
	if err != nil {
		return err
	}
	*v = append(*v, p...)
	return nil
}

// String implements pflag.Value.
func (v *prefixesValue) String() string {
	parts := make([]string, len(*v))
	for i, p := range *v {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// Type implements pflag.Value.
func (v *prefixesValue) Type() string { return "cidrs" }

// splitList trims the values of a list flag and drops empty ones.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
