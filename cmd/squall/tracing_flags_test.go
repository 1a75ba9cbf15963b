package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/internal/tracing"
)

// TestTracingOptions reads the tracing settings from flags and the
// standard OTEL_* variables, as the roles do before they start.
func TestTracingOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    tracing.Config // compared: Endpoint, TracesEndpoint, Protocol, Sampler, ServiceName, Disabled
		wantErr string
	}{
		{name: "defaults: off", want: tracing.Config{Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "squall-engine"}},
		{name: "variables", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_SERVICE_NAME": "engine-eu", "SQUALL_OTEL_ENDPOINT": "http://ignored:1"},
			want: tracing.Config{Endpoint: "http://c:4317", Protocol: "grpc", Sampler: "traceidratio", ServiceName: "engine-eu"}},
		{name: "flag wins", args: []string{"--otel-endpoint", "http://flag:4318"}, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"},
			want: tracing.Config{Endpoint: "http://flag:4318", Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "squall-engine"}},
		{name: "traces endpoint and protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			want: tracing.Config{TracesEndpoint: "http://c:4317", Protocol: "grpc", Sampler: "parentbased_always_on", ServiceName: "squall-engine"}},
		{name: "protocol flag wins over the traces variable", args: []string{"--otel-protocol", "http/protobuf"}, env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			want: tracing.Config{Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "squall-engine"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"},
			want: tracing.Config{Endpoint: "http://c:4318", Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "squall-engine", Disabled: true}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
			want: tracing.Config{Endpoint: "http://c:4318", Protocol: "http/protobuf", Sampler: "parentbased_always_on", ServiceName: "squall-engine", Disabled: true}},
		{name: "exporter zipkin", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, wantErr: `OTEL_SDK_DISABLED="maybe"`},
		{name: "bad sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "bogus"}, wantErr: `tracing (--otel-* flags, OTEL_* variables): sampler "bogus"`},
		{name: "bad protocol", args: []string{"--otel-protocol", "udp"}, wantErr: `protocol "udp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var o tracingOptions
			c := &cobra.Command{Use: "role"}
			tracingFlags(c.Flags(), &o, tracing.ServiceEngine)
			if err := c.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			err := bindEnv(c, lookup)
			if err == nil {
				err = o.complete(c.Flags(), lookup)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tracing.Config{Endpoint: o.cfg.Endpoint, TracesEndpoint: o.cfg.TracesEndpoint, Protocol: o.cfg.Protocol,
				Sampler: o.cfg.Sampler, ServiceName: o.cfg.ServiceName, Disabled: o.cfg.Disabled}
			if got != tt.want {
				t.Errorf("config %+v, want %+v", got, tt.want)
			}
		})
	}
}
