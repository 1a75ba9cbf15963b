// Package tracing sets up OpenTelemetry tracing for a Squall role and
// carries the helpers the roles share: the W3C traceparent of a span, the
// span context of a record's headers, and a log handler that adds the
// active span's ids to every log line.
//
// # Off unless an endpoint is configured
//
// [New] builds nothing when [Config] names no OTLP endpoint: its
// [Tracing.TracerProvider] is then nil, and the roles' components, given a
// nil provider, start no span and pay nothing but a nil check. With an
// endpoint, spans go through a batch processor to an OTLP exporter over
// gRPC or HTTP (protobuf), chosen by [Config.Protocol].
//
// # Configuration
//
// The command line maps the standard OpenTelemetry variables onto
// [Config] (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG,
// OTEL_SERVICE_NAME, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none). The
// exporters read the rest themselves: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY and their
// _TRACES_ forms; the batch processor reads OTEL_BSP_*; the resource takes
// OTEL_RESOURCE_ATTRIBUTES.
package tracing
