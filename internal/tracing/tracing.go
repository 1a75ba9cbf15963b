package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The protocols of [Config.Protocol].
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// The samplers of [Config.Sampler], as OTEL_TRACES_SAMPLER names them.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Default service names of the roles (OTEL_SERVICE_NAME overrides them).
const (
	ServiceMaster    = "squall-master"
	ServiceSatellite = "squall-satellite"
	ServiceEngine    = "squall-engine"
)

// Config configures tracing. The zero value is off.
type Config struct {
	// Endpoint is the base URL of an OTLP receiver
	// (OTEL_EXPORTER_OTLP_ENDPOINT), such as http://collector:4318 for
	// HTTP or http://collector:4317 for gRPC; over HTTP the spans go to
	// its path /v1/traces. An https URL uses TLS. Empty, with
	// TracesEndpoint empty too, turns tracing off.
	Endpoint string
	// TracesEndpoint is the full URL spans are sent to
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); it wins over Endpoint and is
	// used as it is.
	TracesEndpoint string
	// Protocol is "http/protobuf" (the default) or "grpc"
	// (OTEL_EXPORTER_OTLP_PROTOCOL).
	Protocol string
	// Sampler is the sampler of new traces (OTEL_TRACES_SAMPLER):
	// always_on, always_off, traceidratio, parentbased_always_on (the
	// default), parentbased_always_off or parentbased_traceidratio.
	Sampler string
	// SamplerArg is the ratio of the traceidratio samplers, 0 to 1
	// (OTEL_TRACES_SAMPLER_ARG; default 1).
	SamplerArg string
	// ServiceName is the service.name of the spans (OTEL_SERVICE_NAME).
	ServiceName string
	// ServiceVersion is the service.version of the spans.
	ServiceVersion string
	// Disabled turns tracing off whatever the endpoint
	// (OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none).
	Disabled bool
}

// Enabled reports whether c exports spans: an endpoint is set and tracing
// is not disabled.
func (c Config) Enabled() bool {
	return !c.Disabled && (c.Endpoint != "" || c.TracesEndpoint != "")
}

// Validate checks the protocol, the sampler and the endpoints.
func (c Config) Validate() error {
	var errs []error
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		errs = append(errs, fmt.Errorf("protocol %q: want grpc or http/protobuf", c.Protocol))
	}
	if _, err := c.sampler(); err != nil {
		errs = append(errs, err)
	}
	for _, e := range []struct{ name, value string }{{"endpoint", c.Endpoint}, {"traces endpoint", c.TracesEndpoint}} {
		if e.value == "" {
			continue
		}
		u, err := url.Parse(e.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want an http:// or https:// URL", e.name, e.value))
		}
	}
	return errors.Join(errs...)
}

// sampler returns the sampler of c.
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if c.SamplerArg != "" {
		r, err := strconv.ParseFloat(c.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("sampler argument %q: want a ratio from 0 to 1", c.SamplerArg)
		}
		ratio = r
	}
	switch c.Sampler {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample(), nil
	case SamplerAlwaysOff:
		return sdktrace.NeverSample(), nil
	case SamplerTraceIDRatio:
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "", SamplerParentBasedAlwaysOn:
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case SamplerParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("sampler %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", c.Sampler)
}

// Tracing is the tracing of one process: a tracer provider exporting to
// OTLP, or nothing when off. Build it with [New]; [Tracing.Shutdown] it
// last.
type Tracing struct {
	provider *sdktrace.TracerProvider
	exporter string // the URL and protocol, for the start log
}

// New builds the tracing that cfg describes: nothing when it is off
// ([Config.Enabled]), else an OTLP exporter behind a batch span processor.
// It opens no connection: the exporter connects when it first sends.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if !cfg.Enabled() {
		return &Tracing{}, nil
	}
	sampler, _ := cfg.sampler()
	target := cfg.TracesEndpoint
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case ProtocolGRPC:
		if target == "" {
			target = cfg.Endpoint
		}
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(target))
	default:
		if target == "" {
			target = strings.TrimRight(cfg.Endpoint, "/") + "/v1/traces"
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithFromEnv(), resource.WithAttributes(attrs...))
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	protocol := cfg.Protocol
	if protocol == "" {
		protocol = ProtocolHTTPProtobuf
	}
	return &Tracing{
		provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sampler), sdktrace.WithResource(res)),
		exporter: protocol + " " + redact(target),
	}, nil
}

// redact drops the user info and the query of a URL, for logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// TracerProvider returns the provider the components start their spans
// with, or nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider
}

// Exporter describes where spans go ("http/protobuf http://…/v1/traces"),
// or "" when tracing is off.
func (t *Tracing) Exporter() string {
	if t == nil {
		return ""
	}
	return t.exporter
}

// ForceFlush exports the spans ended so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown exports the spans still buffered and stops the exporter, within
// ctx. Spans started later are dropped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
