package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/squallhq/squall/internal/tracing"
)

// envAnnotation is the flag annotation naming a flag's environment
// variable when it is not SQUALL_ and its name (the OpenTelemetry flags
// read the standard OTEL_ variables).
const envAnnotation = "squall_env"

// tracingShutdownTimeout bounds the export of the spans left at exit.
const tracingShutdownTimeout = 5 * time.Second

// tracingOptions are the tracing flags of a role.
type tracingOptions struct {
	cfg tracing.Config
}

// tracingFlags defines the OpenTelemetry flags, each read from its
// standard variable. service is the role's default service name; empty
// leaves --otel-service-name out (squall dev names each of its parts).
func tracingFlags(f *pflag.FlagSet, o *tracingOptions, service string) {
	f.StringVar(&o.cfg.Endpoint, "otel-endpoint", "", "base URL of an OTLP receiver for traces, such as http://collector:4318 (http/protobuf) or http://collector:4317 (grpc); tracing is off without it (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
	f.StringVar(&o.cfg.Protocol, "otel-protocol", tracing.ProtocolHTTPProtobuf, "OTLP protocol: http/protobuf or grpc (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL wins)")
	f.StringVar(&o.cfg.Sampler, "otel-sampler", tracing.SamplerParentBasedAlwaysOn, "sampler of new traces: parentbased_always_on, parentbased_always_off, parentbased_traceidratio, always_on, always_off or traceidratio; parentbased follows a sampled traceparent")
	f.StringVar(&o.cfg.SamplerArg, "otel-sampler-arg", "", "ratio of the traceidratio samplers, 0 to 1 (default 1)")
	env := map[string]string{
		"otel-endpoint":    "OTEL_EXPORTER_OTLP_ENDPOINT",
		"otel-protocol":    "OTEL_EXPORTER_OTLP_PROTOCOL",
		"otel-sampler":     "OTEL_TRACES_SAMPLER",
		"otel-sampler-arg": "OTEL_TRACES_SAMPLER_ARG",
	}
	if service != "" {
		f.StringVar(&o.cfg.ServiceName, "otel-service-name", service, "service.name of the spans")
		env["otel-service-name"] = "OTEL_SERVICE_NAME"
	}
	for name, v := range env {
		_ = f.SetAnnotation(name, envAnnotation, []string{v})
	}
}

// complete reads the standard variables that have no flag: the
// traces-only endpoint and protocol, OTEL_SDK_DISABLED and
// OTEL_TRACES_EXPORTER.
func (o *tracingOptions) complete(f *pflag.FlagSet, lookup func(string) (string, bool)) error {
	get := func(name string) string {
		v, _ := lookup(name)
		return v
	}
	o.cfg.TracesEndpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if p := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" && !f.Changed("otel-protocol") {
		o.cfg.Protocol = p
	}
	if v := get("OTEL_SDK_DISABLED"); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("environment variable OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		o.cfg.Disabled = disabled
	}
	switch v := get("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		o.cfg.Disabled = true
	default:
		return fmt.Errorf("environment variable OTEL_TRACES_EXPORTER=%q: squall exports traces with otlp (or none)", v)
	}
	if err := o.cfg.Validate(); err != nil {
		return fmt.Errorf("tracing (--otel-* flags, OTEL_* variables): %w", err)
	}
	return nil
}

// start builds the tracing of a service (its name replacing the flag's when
// set), and logs where its spans go. Export errors are logged at warn.
func (o *tracingOptions) start(ctx context.Context, service string, logger *slog.Logger) (*tracing.Tracing, error) {
	cfg := o.cfg
	if service != "" {
		cfg.ServiceName = service
	}
	cfg.ServiceVersion = version
	t, err := tracing.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if t.TracerProvider() != nil {
		// The SDK reports failed exports through its one global
		// handler: send them to the role's log.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing: spans not exported", "error", err.Error())
		}))
		logger.Info("tracing on", "service", cfg.ServiceName, "exporter", t.Exporter(), "sampler", cfg.Sampler)
	}
	return t, nil
}

// stopTracing exports the spans left, within tracingShutdownTimeout.
func stopTracing(ctx context.Context, ts ...*tracing.Tracing) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
	defer cancel()
	var first error
	for _, t := range ts {
		if err := t.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// flagEnv returns the environment variable of a flag: its annotation's,
// else SQUALL_ and its name (envName).
func flagEnv(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return envName(f.Name)
}
