package action

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefault_isValid(t *testing.T) {
	t.Parallel()
	cfg := Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	cfg, err := Load(filepath.Join("testdata", "config", "good.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Retry: RetryConfig{MaxAttempts: 3, BaseDelay: Duration(250 * time.Millisecond), MaxDelay: Duration(5 * time.Second), Jitter: 0.2},
		Archive: ArchiveConfig{
			BasePath:     "./archive",
			DefaultPath:  "/default/file.out",
			Paths:        map[string]string{"one": "/one/${key}/file.log", "two": "two/${a}-${b}.log"},
			MaxOpenFiles: 8,
			FileTTL:      Duration(30 * time.Second),
			RecentKeys:   DefaultArchiveRecentKeys,
		},
		Script: ScriptConfig{
			AllowedDir: "/etc/squall/scripts",
			Timeout:    Duration(5 * time.Second),
			MaxOutput:  1024,
			Env:        map[string]string{"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
		},
		HTTP:    HTTPConfig{Timeout: Duration(3 * time.Second), AllowedSchemes: []string{"https"}, AllowedHosts: []string{"hooks.example.com", "*.example.org"}},
		Foreach: ForeachConfig{MaxDepth: 2},
		Kafka:   KafkaConfig{DefaultTopic: "squall.out", AllowedTopics: []string{"squall.alerts"}},
		Finding: FindingConfig{
			MasterURLs: []string{"https://master-1:8080", "https://master-2:8080"},
			TokenFile:  "/etc/squall/finding.token",
			Timeout:    Duration(4 * time.Second),
		},
		Elasticsearch: ElasticsearchConfig{
			DefaultEndpoint:  "https://es.example.com:9200",
			AllowedEndpoints: []string{"https://es2.example.com:9200"},
			Username:         "squall",
			PasswordFile:     "/etc/squall/es.password",
			CAFile:           "/etc/squall/es-ca.pem",
			Timeout:          Duration(7 * time.Second),
			FlushInterval:    Duration(50 * time.Millisecond),
			FlushBytes:       2 << 20,
			Workers:          4,
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("Load =\n%+v\nwant\n%+v", cfg, want)
	}

	if _, err := Load(filepath.Join("testdata", "config", "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		wantErr string // empty: success
		check   func(t *testing.T, c Config)
	}{
		{
			name: "empty object keeps the defaults",
			in:   `{}`,
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c, Default()) {
					t.Errorf("got %+v, want the defaults", c)
				}
			},
		},
		{
			name: "fields override the defaults",
			in:   `{"retry": {"max_attempts": 2}, "script": {"env": {}}}`,
			check: func(t *testing.T, c Config) {
				if c.Retry.MaxAttempts != 2 || c.Retry.BaseDelay != Default().Retry.BaseDelay {
					t.Errorf("retry = %+v", c.Retry)
				}
				if c.Script.Env == nil || len(c.Script.Env) != 0 {
					t.Errorf("env = %v, want empty", c.Script.Env)
				}
			},
		},
		{name: "unknown field", in: `{"retry": {"attempts": 2}}`, wantErr: `unknown field "attempts"`},
		{name: "unknown section", in: `{"nats": {}}`, wantErr: `unknown field "nats"`},
		{name: "unknown kafka field", in: `{"kafka": {"topic": "x"}}`, wantErr: `unknown field "topic"`},
		{name: "unknown finding field", in: `{"finding": {"token": "x"}}`, wantErr: `unknown field "token"`},
		{name: "unknown elasticsearch field", in: `{"elasticsearch": {"password": "x"}}`, wantErr: `unknown field "password"`},
		{name: "trailing data", in: `{} {}`, wantErr: "data after the JSON object"},
		{name: "duration as a number", in: `{"http": {"timeout": 10}}`, wantErr: "duration must be a string"},
		{name: "bad duration", in: `{"http": {"timeout": "10 parsecs"}}`, wantErr: "time: unknown unit"},
		{name: "not JSON", in: `retry`, wantErr: "invalid character"},
		{name: "http section without hosts", in: `{"http": {"timeout": "5s"}}`,
			wantErr: `http.allowed_hosts: is required to enable the http executor: list the hosts http actions may reach, or set "allow_any_host": true`},
		{name: "empty http section", in: `{"http": {}}`, wantErr: "http.allowed_hosts: is required"},
		{name: "http with empty hosts", in: `{"http": {"allowed_hosts": []}}`, wantErr: "http.allowed_hosts: is required"},
		{name: "no http section: http disabled", in: `{"retry": {"max_attempts": 2}}`, check: func(t *testing.T, c Config) {
			if c.HTTP.Enabled() {
				t.Errorf("http enabled by a file without an http section: %+v", c.HTTP)
			}
		}},
		{name: "http allow_any_host", in: `{"http": {"allow_any_host": true}}`, check: func(t *testing.T, c Config) {
			if !c.HTTP.Enabled() || !c.HTTP.AllowAnyHost {
				t.Errorf("http = %+v, want enabled for any host", c.HTTP)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		modify    func(c *Config)
		wantField string // empty: valid
		wantErr   string
	}{
		{"archive enabled", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x.log"
		}, "", ""},
		{"max_attempts 0", func(c *Config) { c.Retry.MaxAttempts = 0 }, "retry.max_attempts", "between 1 and 100"},
		{"base_delay 0", func(c *Config) { c.Retry.BaseDelay = 0 }, "retry.base_delay", "positive"},
		{"max_delay below base", func(c *Config) { c.Retry.MaxDelay = Duration(time.Millisecond) }, "retry.max_delay", "at least"},
		{"jitter above 1", func(c *Config) { c.Retry.Jitter = 1.5 }, "retry.jitter", "between 0 and 1"},
		{"paths without base_path", func(c *Config) { c.Archive.Paths = map[string]string{"a": "a.log"} }, "archive.base_path", "required"},
		{"base_path without default_path", func(c *Config) { c.Archive.BasePath = "/tmp/a" }, "archive.default_path", "required"},
		{"default_path with ..", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x/../../etc/passwd"
		}, "archive.default_path", "escapes"},
		{"template with ..", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x.log"
			c.Archive.Paths = map[string]string{"t": "${a}/../x"}
		}, "archive.paths.t", "escapes"},
		{"unterminated parameter", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x.log"
			c.Archive.Paths = map[string]string{"t": "${a.log"}
		}, "archive.paths.t", "unterminated"},
		{"empty parameter", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x/${}.log"
		}, "archive.default_path", "invalid parameter"},
		{"only slashes", func(c *Config) { c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "//" }, "archive.default_path", "empty path"},
		{"empty archive type", func(c *Config) {
			c.Archive.BasePath, c.Archive.DefaultPath = "/tmp/a", "x.log"
			c.Archive.Paths = map[string]string{"": "y.log"}
		}, "archive.paths", "must not be empty"},
		{"max_open_files 0", func(c *Config) { c.Archive.MaxOpenFiles = 0 }, "archive.max_open_files", "at least 1"},
		{"recent_keys negative", func(c *Config) { c.Archive.RecentKeys = -1 }, "archive.recent_keys", "between 0 and"},
		{"relative allowed_dir", func(c *Config) { c.Script.AllowedDir = "scripts" }, "script.allowed_dir", "absolute"},
		{"script timeout 0", func(c *Config) { c.Script.Timeout = 0 }, "script.timeout", "positive"},
		{"max_output 0", func(c *Config) { c.Script.MaxOutput = 0 }, "script.max_output", "at least 1"},
		{"env name with =", func(c *Config) { c.Script.Env = map[string]string{"A=B": "c"} }, "script.env", "invalid variable"},
		{"no schemes", func(c *Config) { c.HTTP.AllowedSchemes = nil }, "http.allowed_schemes", "must not be empty"},
		{"ftp scheme", func(c *Config) { c.HTTP.AllowedSchemes = []string{"ftp"} }, "http.allowed_schemes", "not http or https"},
		{"host with port", func(c *Config) { c.HTTP.AllowedHosts = []string{"a.example.com:443"} }, "http.allowed_hosts", "host name"},
		{"uppercase host", func(c *Config) { c.HTTP.AllowedHosts = []string{"A.example.com"} }, "http.allowed_hosts", "lowercase"},
		{"IP hosts", func(c *Config) { c.HTTP.AllowedHosts = []string{"127.0.0.1", "::1", "hooks.example.com"} }, "", ""},
		{"bracketed IPv6 host", func(c *Config) { c.HTTP.AllowedHosts = []string{"[::1]"} }, "http.allowed_hosts", "IP address"},
		{"http timeout 0", func(c *Config) { c.HTTP.Timeout = 0 }, "http.timeout", "positive"},
		{"max_depth 0", func(c *Config) { c.Foreach.MaxDepth = 0 }, "foreach.max_depth", "at least 1"},
		{"kafka enabled", func(c *Config) { c.Kafka = KafkaConfig{DefaultTopic: "a.b_c-1", AllowedTopics: []string{"x"}} }, "", ""},
		{"bad default topic", func(c *Config) { c.Kafka.DefaultTopic = "a b" }, "kafka.default_topic", "topic name"},
		{"bad allowed topic", func(c *Config) { c.Kafka.AllowedTopics = []string{""} }, "kafka.allowed_topics", "topic name"},
		{"finding enabled", func(c *Config) { c.Finding.MasterURLs, c.Finding.TokenFile = []string{"http://m:8080/"}, "/t" }, "", ""},
		{"finding without token", func(c *Config) { c.Finding.MasterURLs = []string{"http://m:8080"} }, "finding.token_file", "required"},
		{"finding token without urls", func(c *Config) { c.Finding.TokenFile = "/t" }, "finding.master_urls", "required"},
		{"finding url with user", func(c *Config) {
			c.Finding.MasterURLs, c.Finding.TokenFile = []string{"http://u:p@m:8080"}, "/t"
		}, "finding.master_urls", "without user info"},
		{"finding ftp url", func(c *Config) { c.Finding.MasterURLs, c.Finding.TokenFile = []string{"ftp://m"}, "/t" }, "finding.master_urls", "http or https"},
		{"finding timeout 0", func(c *Config) { c.Finding.Timeout = 0 }, "finding.timeout", "positive"},
		{"elasticsearch enabled", func(c *Config) { c.Elasticsearch.DefaultEndpoint = "http://es:9200" }, "", ""},
		{"elasticsearch query", func(c *Config) { c.Elasticsearch.DefaultEndpoint = "http://es:9200?x=1" }, "elasticsearch.default_endpoint", "query"},
		{"elasticsearch bad allowed", func(c *Config) { c.Elasticsearch.AllowedEndpoints = []string{"es:9200"} }, "elasticsearch.allowed_endpoints", ""},
		{"elasticsearch key and user", func(c *Config) { c.Elasticsearch.APIKeyFile, c.Elasticsearch.Username = "/k", "u" }, "elasticsearch.api_key_file", "excludes"},
		{"elasticsearch password without user", func(c *Config) { c.Elasticsearch.PasswordFile = "/p" }, "elasticsearch.username", "required"},
		{"elasticsearch timeout 0", func(c *Config) { c.Elasticsearch.Timeout = 0 }, "elasticsearch.timeout", "positive"},
		{"elasticsearch flush interval 0", func(c *Config) { c.Elasticsearch.FlushInterval = 0 }, "elasticsearch.flush_interval", "positive"},
		{"elasticsearch flush bytes 0", func(c *Config) { c.Elasticsearch.FlushBytes = 0 }, "elasticsearch.flush_bytes", "between"},
		{"elasticsearch flush bytes huge", func(c *Config) { c.Elasticsearch.FlushBytes = 200 << 20 }, "elasticsearch.flush_bytes", "between"},
		{"elasticsearch workers 0", func(c *Config) { c.Elasticsearch.Workers = 0 }, "elasticsearch.workers", "between"},
		{"elasticsearch workers 65", func(c *Config) { c.Elasticsearch.Workers = 65 }, "elasticsearch.workers", "between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.modify(&c)
			err := c.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v, want a ConfigError on %s containing %q", err, tt.wantField, tt.wantErr)
			}
		})
	}
}

func TestDuration_JSON(t *testing.T) {
	t.Parallel()
	b, err := Duration(1500 * time.Millisecond).MarshalJSON()
	if err != nil || string(b) != `"1.5s"` {
		t.Fatalf("MarshalJSON = %s, %v", b, err)
	}
	var d Duration
	if err := d.UnmarshalJSON(b); err != nil || d != Duration(1500*time.Millisecond) {
		t.Fatalf("UnmarshalJSON = %v, %v", d, err)
	}
}
