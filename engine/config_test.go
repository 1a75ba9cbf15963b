package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/action"
)

func validConfig() Config {
	cfg := Default()
	cfg.MasterURLs = []string{"http://m1:8080", "m2:8080"}
	cfg.Token = "tok"
	cfg.Brokers = []string{"k1:9092"}
	return cfg
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Config)
		field  string
		want   string
	}{
		{"valid", func(*Config) {}, "", ""},
		{"no masters", func(c *Config) { c.MasterURLs = nil }, "master_urls", "at least one"},
		{"bad scheme", func(c *Config) { c.MasterURLs = []string{"ftp://m"} }, "master_urls", "http or https"},
		{"query", func(c *Config) { c.MasterURLs = []string{"http://m/?x=1"} }, "master_urls", "no query"},
		{"no token", func(c *Config) { c.Token = "" }, "token", "required"},
		{"no brokers", func(c *Config) { c.Brokers = nil }, "kafka", "at least one broker"},
		{"bad broker", func(c *Config) { c.Brokers = []string{"k1"} }, "kafka", "host:port"},
		{"same topics", func(c *Config) { c.DLQTopic = c.Topic }, "dlq_topic", "differ"},
		{"no dlq", func(c *Config) { c.DLQTopic = "" }, "dlq_topic", "required"},
		{"no group", func(c *Config) { c.Group = "" }, "kafka", "group"},
		{"workers 0", func(c *Config) { c.Workers = 0 }, "workers", "between 1 and"},
		{"workers many", func(c *Config) { c.Workers = MaxWorkers + 1 }, "workers", "between 1 and"},
		{"queue", func(c *Config) { c.QueueSize = 0 }, "queue_size", "less than 1"},
		{"dedupe", func(c *Config) { c.DedupeSize = -1 }, "dedupe_size", "negative"},
		{"commit interval", func(c *Config) { c.CommitInterval = 0 }, "commit_interval", "positive"},
		{"negative commit delay", func(c *Config) { c.CommitDelay = -time.Millisecond }, "commit_delay", "negative"},
		{"backoff", func(c *Config) { c.WatchBackoffMax = time.Millisecond }, "watch_backoff_max", "less than"},
		{"http addr", func(c *Config) { c.HTTPAddr = "8082" }, "http_addr", "host:port"},
		{"sasl", func(c *Config) { c.SASL.Mechanism = "PLAIN" }, "kafka", "username"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			found := false
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if errors.As(e, &ce) && ce.Field == tt.field && strings.Contains(ce.Error(), tt.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %v, want field %s with %q", err, tt.field, tt.want)
			}
		})
	}
}

func TestConfig_DefaultWorkers(t *testing.T) {
	t.Parallel()
	if w := Default().Workers; w < 2 || w > MaxWorkers {
		t.Errorf("default workers %d", w)
	}
}

func TestNew_ActionsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := validConfig()
	cfg.ActionsConfig = filepath.Join(dir, "missing.json")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("New with a missing actions file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, `{"retry": {"max_attempts": 0}}`)
	cfg.ActionsConfig = bad
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "max_attempts") {
		t.Fatalf("New with a bad actions file: %v", err)
	}
	good := filepath.Join(dir, "good.json")
	writeFile(t, good, `{"archive": {"base_path": "`+filepath.Join(dir, "a")+`", "default_path": "x.log"}}`)
	cfg.ActionsConfig = good
	cfg.Registerer = prometheus.NewRegistry()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The metrics were unregistered: a second service can use the registry.
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	// Config.Actions is used instead of the file, and checked.
	acfg := action.Default()
	acfg.Retry.MaxAttempts = 0
	cfg.Actions = &acfg
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "max_attempts") {
		t.Fatalf("New with bad Actions: %v", err)
	}
	acfg = action.Default()
	cfg.Actions, cfg.ActionsConfig = &acfg, filepath.Join(dir, "missing.json")
	s3, err := New(cfg)
	if err != nil {
		t.Fatalf("New with Actions (the file is not read): %v", err)
	}
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
}
