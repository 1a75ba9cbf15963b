package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/fielderr"
)

// Config holds the executor settings: one JSON file, read with [Load] (or
// [Default], [Parse] and [Config.Validate]). Every field is optional; the
// zero values of nested settings are replaced by the defaults only through
// [Default], so build a Config from Default and change what you need.
type Config struct {
	// Retry is the retry policy of [Registry.Run].
	Retry RetryConfig `json:"retry"`
	// Archive configures the archive executor. It is enabled when
	// Archive.BasePath is set.
	Archive ArchiveConfig `json:"archive"`
	// Script configures the script executor. It is enabled when
	// Script.AllowedDir is set.
	Script ScriptConfig `json:"script"`
	// HTTP configures the http executor. It is enabled when
	// HTTP.AllowedHosts is set or HTTP.AllowAnyHost is true (DESIGN
	// decision 21); a file whose http section enables neither is refused
	// by [Parse].
	HTTP HTTPConfig `json:"http"`
	// Foreach configures the foreach executor, always enabled: it runs
	// its inner actions through the registry, so only through the
	// executors that are enabled.
	Foreach ForeachConfig `json:"foreach"`
	// Kafka configures the kafka executor. It is enabled when
	// Kafka.DefaultTopic or Kafka.AllowedTopics is set and [Deps.Producer]
	// is not nil.
	Kafka KafkaConfig `json:"kafka"`
	// Finding configures the finding executor. It is enabled when
	// Finding.MasterURLs is set.
	Finding FindingConfig `json:"finding"`
	// Elasticsearch configures the elasticsearch executor. It is enabled
	// when Elasticsearch.DefaultEndpoint or Elasticsearch.AllowedEndpoints
	// is set.
	Elasticsearch ElasticsearchConfig `json:"elasticsearch"`
}

// KafkaConfig configures the kafka executor.
type KafkaConfig struct {
	// DefaultTopic receives the actions without a topic.
	DefaultTopic string `json:"default_topic"`
	// AllowedTopics lists the other topics an action may name.
	AllowedTopics []string `json:"allowed_topics"`
}

// FindingConfig configures the finding executor.
type FindingConfig struct {
	// MasterURLs are the base URLs of the masters (such as
	// "https://master-1:8080"), tried in order. Empty disables the finding
	// executor.
	MasterURLs []string `json:"master_urls"`
	// TokenFile holds the bearer token, which must carry a tenant claim.
	// It is read when the registry is built. Required with MasterURLs.
	TokenFile string `json:"token_file"`
	// Timeout bounds one request. Default 10s.
	Timeout Duration `json:"timeout"`
}

// ElasticsearchConfig configures the elasticsearch executor.
type ElasticsearchConfig struct {
	// DefaultEndpoint is the Elasticsearch URL for actions without an
	// endpoint.
	DefaultEndpoint string `json:"default_endpoint"`
	// AllowedEndpoints lists the other endpoints an action may name.
	AllowedEndpoints []string `json:"allowed_endpoints"`
	// Username and PasswordFile set basic authentication; the password is
	// read from the file when the registry is built.
	Username     string `json:"username"`
	PasswordFile string `json:"password_file"`
	// APIKeyFile holds an API key (the base64 "id:key" form), sent as
	// "Authorization: ApiKey ..."; it excludes Username.
	APIKeyFile string `json:"api_key_file"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// endpoints' certificates, instead of the system's.
	CAFile string `json:"ca_file"`
	// Timeout bounds one _bulk request, reading its response included.
	// Default 10s.
	Timeout Duration `json:"timeout"`
	// FlushInterval is the longest a document waits in its endpoint's
	// batch for others to share its _bulk request. Default 100ms.
	FlushInterval Duration `json:"flush_interval"`
	// WaitForBatch makes documents wait for FlushInterval or FlushBytes
	// even when no _bulk request is under way. By default a document is
	// sent at once when the indexer is idle, and the documents that arrive
	// during a request go together in the next one.
	WaitForBatch bool `json:"wait_for_batch"`
	// FlushBytes sends a batch as a _bulk request once it holds this many
	// bytes (a larger document goes alone). Default 1 MiB; at most 100 MiB (Elasticsearch's default
	// http.max_content_length).
	FlushBytes int `json:"flush_bytes"`
	// Workers bounds the _bulk requests in flight per endpoint; documents
	// arriving meanwhile wait in one batch for the next. Default 2.
	Workers int `json:"workers"`
}

// RetryConfig is the retry policy for retriable failures: attempt n+1 starts
// after min(MaxDelay, BaseDelay·2ⁿ⁻¹), shortened by a random fraction of at
// most Jitter of itself.
type RetryConfig struct {
	// MaxAttempts bounds the executions of one action, the first included
	// (1 disables retries). Default 5.
	MaxAttempts int `json:"max_attempts"`
	// BaseDelay is the delay before the first retry. Default 100ms.
	BaseDelay Duration `json:"base_delay"`
	// MaxDelay caps every delay. Default 10s.
	MaxDelay Duration `json:"max_delay"`
	// Jitter, between 0 and 1, is the largest fraction of a delay that is
	// randomly taken off it, so that failing actions do not retry in step.
	// Default 0.5.
	Jitter float64 `json:"jitter"`
}

// Bounds of [ArchiveConfig.RecentKeys].
const (
	DefaultArchiveRecentKeys = 4096
	MaxArchiveRecentKeys     = 1 << 20
)

// ArchiveConfig configures the archive executor.
type ArchiveConfig struct {
	// BasePath is the directory every archive file lives under; it is
	// created if missing. Empty disables the archive executor.
	BasePath string `json:"base_path"`
	// DefaultPath is the file, relative to BasePath, for actions without an
	// archive_type. Required when BasePath is set.
	DefaultPath string `json:"default_path"`
	// Paths maps an archive_type to a file template relative to BasePath.
	// "${name}" in a template is replaced by the payload's top-level string
	// field name. A leading "/" is allowed (Tornado writes templates so) and
	// means BasePath.
	Paths map[string]string `json:"paths"`
	// MaxOpenFiles bounds the files kept open between writes. Default 64.
	MaxOpenFiles int `json:"max_open_files"`
	// FileTTL is how long a file stays open before it is reopened, so that
	// an archive file moved away (log rotation) is recreated. Default 1m.
	FileTTL Duration `json:"file_ttl"`
	// RecentKeys is how many idempotency keys the archive remembers per
	// open file, of the last lines it found in the file (read back at
	// open, at most RecentKeys × 4 KiB, and caught up before each write)
	// and, apart, of the last lines it wrote: a line whose key is among
	// them is not written again, so that an event an engine runs again
	// after a crash, a rebalance or a restart is archived once. The lines
	// begin with their key ([ArchiveKeyField]). Default 4096 (about 600
	// KB of memory per open file); 0 writes the lines without keys and
	// checks nothing.
	RecentKeys int `json:"recent_keys"`
}

// ScriptConfig configures the script executor.
type ScriptConfig struct {
	// AllowedDir is the absolute directory that holds the runnable
	// programs: a script resolves inside it or is refused. Empty disables
	// the script executor.
	AllowedDir string `json:"allowed_dir"`
	// Timeout bounds one run; the program and its process group are killed
	// when it expires. Default 30s.
	Timeout Duration `json:"timeout"`
	// MaxOutput bounds the bytes of standard output, and of standard error,
	// kept for the log. Default 65536.
	MaxOutput int `json:"max_output"`
	// Env is the whole environment of the programs (the engine's own
	// environment is never passed on). Default: PATH only.
	Env map[string]string `json:"env"`
}

// HTTPConfig configures the http executor.
type HTTPConfig struct {
	// Timeout bounds one request, response headers included. Default 10s.
	Timeout Duration `json:"timeout"`
	// AllowedSchemes lists the URL schemes accepted. Default http, https.
	AllowedSchemes []string `json:"allowed_schemes"`
	// AllowedHosts lists the hosts accepted: an exact name or IP address,
	// or "*.example.com" for every subdomain of example.com. Setting it
	// enables the http executor.
	AllowedHosts []string `json:"allowed_hosts"`
	// AllowAnyHost enables the http executor for every host, internal
	// services included (a server-side request forgery for whoever
	// writes rules or sends Full test events): it must be set explicitly,
	// and the registry logs a warning.
	AllowAnyHost bool `json:"allow_any_host"`
}

// Enabled reports whether the settings enable the http executor.
func (h HTTPConfig) Enabled() bool { return len(h.AllowedHosts) > 0 || h.AllowAnyHost }

// ForeachConfig configures the foreach executor.
type ForeachConfig struct {
	// MaxDepth bounds how deep foreach actions may nest (a foreach among
	// the actions of a foreach is depth 2). Default 4.
	MaxDepth int `json:"max_depth"`
}

// Default returns the default configuration: retries on, logger and
// foreach enabled, every other executor disabled (DESIGN decision 21).
func Default() Config {
	return Config{
		Retry: RetryConfig{
			MaxAttempts: 5,
			BaseDelay:   Duration(100 * time.Millisecond),
			MaxDelay:    Duration(10 * time.Second),
			Jitter:      0.5,
		},
		Archive: ArchiveConfig{
			MaxOpenFiles: 64,
			FileTTL:      Duration(time.Minute),
			RecentKeys:   DefaultArchiveRecentKeys,
		},
		Script: ScriptConfig{
			Timeout:   Duration(30 * time.Second),
			MaxOutput: 64 << 10,
			Env:       map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
		},
		HTTP: HTTPConfig{
			Timeout:        Duration(10 * time.Second),
			AllowedSchemes: []string{"http", "https"},
		},
		Foreach: ForeachConfig{MaxDepth: 4},
		Finding: FindingConfig{Timeout: Duration(10 * time.Second)},
		Elasticsearch: ElasticsearchConfig{
			Timeout:       Duration(10 * time.Second),
			FlushInterval: Duration(100 * time.Millisecond),
			FlushBytes:    1 << 20,
			Workers:       2,
		},
	}
}

// Parse reads a JSON configuration over [Default]: fields present in the
// file replace the defaults. Unknown fields and trailing data are errors,
// and so is an http section that enables nothing (neither allowed_hosts
// nor allow_any_host): a [*ConfigError] on http.allowed_hosts. Parse does
// not validate otherwise: call [Config.Validate].
func Parse(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("parse action config: %w", err)
	}
	cfg := Default()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	// A file that sets "env" replaces the default environment.
	cfg.Script.Env = nil
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("parse action config: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("parse action config: data after the JSON object")
	}
	// An http section says the file's author wants the executor: without
	// its hosts it would run nothing (or, before decision 21, anything).
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(data, &sections); err == nil {
		if _, ok := sections["http"]; ok && !cfg.HTTP.Enabled() {
			return Config{}, fmt.Errorf("parse action config: %w", &ConfigError{Field: "http.allowed_hosts",
				Err: errors.New(`is required to enable the http executor: list the hosts http actions may reach, or set "allow_any_host": true; remove the http section to leave the executor disabled`)})
		}
	}
	if cfg.Script.Env == nil {
		cfg.Script.Env = Default().Script.Env
	}
	return cfg, nil
}

// Load reads, parses and validates the configuration file at path.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load action config: %w", err)
	}
	return parseFile(path, b)
}

// parseFile parses and validates data, the content of the file at path.
func parseFile(path string, data []byte) (Config, error) {
	cfg, err := Parse(bytes.NewReader(data))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ConfigError reports an invalid field of a [Config] (see [fielderr.Error]).
type ConfigError = fielderr.Error

// Validate checks the configuration. It returns every problem found, each
// a [*ConfigError], joined with [errors.Join].
func (c Config) Validate() error {
	var problems fielderr.List
	bad := problems.Addf

	r := c.Retry
	if r.MaxAttempts < 1 || r.MaxAttempts > 100 {
		bad("retry.max_attempts", "must be between 1 and 100, not %d", r.MaxAttempts)
	}
	if r.BaseDelay <= 0 {
		bad("retry.base_delay", "must be positive")
	}
	if r.MaxDelay < r.BaseDelay {
		bad("retry.max_delay", "must be at least retry.base_delay")
	}
	if !(r.Jitter >= 0 && r.Jitter <= 1) {
		bad("retry.jitter", "must be between 0 and 1")
	}

	a := c.Archive
	if a.BasePath == "" {
		if a.DefaultPath != "" || len(a.Paths) > 0 {
			bad("archive.base_path", "is required with default_path or paths")
		}
	} else {
		if a.DefaultPath == "" {
			bad("archive.default_path", "is required with base_path")
		} else if _, err := parsePathTemplate(a.DefaultPath); err != nil {
			bad("archive.default_path", "%w", err)
		}
		for _, k := range slices.Sorted(maps.Keys(a.Paths)) {
			if k == "" {
				bad("archive.paths", "an archive type must not be empty")
			}
			if _, err := parsePathTemplate(a.Paths[k]); err != nil {
				bad("archive.paths."+k, "%w", err)
			}
		}
	}
	if a.MaxOpenFiles < 1 {
		bad("archive.max_open_files", "must be at least 1")
	}
	if a.FileTTL <= 0 {
		bad("archive.file_ttl", "must be positive")
	}
	if a.RecentKeys < 0 || a.RecentKeys > MaxArchiveRecentKeys {
		bad("archive.recent_keys", "must be between 0 and %d", MaxArchiveRecentKeys)
	}

	s := c.Script
	if s.AllowedDir != "" && !filepath.IsAbs(s.AllowedDir) {
		bad("script.allowed_dir", "must be an absolute path")
	}
	if s.Timeout <= 0 {
		bad("script.timeout", "must be positive")
	}
	if s.MaxOutput < 1 {
		bad("script.max_output", "must be at least 1")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(s.Env[k], 0) {
			bad("script.env", "invalid variable %q", k)
		}
	}

	h := c.HTTP
	if h.Timeout <= 0 {
		bad("http.timeout", "must be positive")
	}
	if len(h.AllowedSchemes) == 0 {
		bad("http.allowed_schemes", "must not be empty")
	}
	for _, sc := range h.AllowedSchemes {
		if sc != "http" && sc != "https" {
			bad("http.allowed_schemes", "%q is not http or https", sc)
		}
	}
	for _, host := range h.AllowedHosts {
		if _, err := netip.ParseAddr(host); err == nil {
			continue
		}
		name := strings.TrimPrefix(host, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ []") || name != strings.ToLower(name) {
			bad("http.allowed_hosts", "%q is not a lowercase host name, *.domain or IP address", host)
		}
	}

	if c.Foreach.MaxDepth < 1 {
		bad("foreach.max_depth", "must be at least 1")
	}

	k := c.Kafka
	if k.DefaultTopic != "" && !validTopic(k.DefaultTopic) {
		bad("kafka.default_topic", "%q is not a Kafka topic name", k.DefaultTopic)
	}
	for _, t := range k.AllowedTopics {
		if !validTopic(t) {
			bad("kafka.allowed_topics", "%q is not a Kafka topic name", t)
		}
	}

	f := c.Finding
	if len(f.MasterURLs) > 0 && f.TokenFile == "" {
		bad("finding.token_file", "is required with master_urls")
	}
	if len(f.MasterURLs) == 0 && f.TokenFile != "" {
		bad("finding.master_urls", "is required with token_file")
	}
	for _, u := range f.MasterURLs {
		if err := checkBaseURL(u); err != nil {
			bad("finding.master_urls", "%w", err)
		}
	}
	if f.Timeout <= 0 {
		bad("finding.timeout", "must be positive")
	}

	e := c.Elasticsearch
	if e.DefaultEndpoint != "" {
		if err := checkBaseURL(e.DefaultEndpoint); err != nil {
			bad("elasticsearch.default_endpoint", "%w", err)
		}
	}
	for _, u := range e.AllowedEndpoints {
		if err := checkBaseURL(u); err != nil {
			bad("elasticsearch.allowed_endpoints", "%w", err)
		}
	}
	if e.APIKeyFile != "" && e.Username != "" {
		bad("elasticsearch.api_key_file", "excludes username")
	}
	if e.PasswordFile != "" && e.Username == "" {
		bad("elasticsearch.username", "is required with password_file")
	}
	if e.Timeout <= 0 {
		bad("elasticsearch.timeout", "must be positive")
	}
	if e.FlushInterval <= 0 {
		bad("elasticsearch.flush_interval", "must be positive")
	}
	if e.FlushBytes < 1 || e.FlushBytes > 100<<20 {
		bad("elasticsearch.flush_bytes", "must be between 1 and %d, not %d", 100<<20, e.FlushBytes)
	}
	if e.Workers < 1 || e.Workers > 64 {
		bad("elasticsearch.workers", "must be between 1 and 64, not %d", e.Workers)
	}
	return problems.Err()
}

// Duration is a [time.Duration] written in JSON as a string such as "250ms"
// or "1m30s".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"10s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// validTopic reports whether t is a legal Kafka topic name.
func validTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkBaseURL checks an http or https URL with a host, no query, fragment
// or user info (credentials belong in files).
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: scheme must be http or https", redactURL(u))
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s: must be scheme://host[:port][/path], without user info, query or fragment", redactURL(u))
	}
	return nil
}
