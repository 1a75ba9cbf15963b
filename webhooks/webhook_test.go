package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/squallhq/squall/webhooks/signing"
)

// The token and secret used in testdata/bad; no error may contain them.
const (
	leakToken  = "TOKEN-SHOULD-NOT-LEAK"
	leakSecret = "SECRET-SHOULD-NOT-LEAK"
)

func mustParse(t testing.TB, doc string) *Webhook {
	t.Helper()
	w, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return w
}

func TestParse_Good(t *testing.T) {
	t.Parallel()
	w := mustParse(t, `{
		"id": "github_repository",
		"token": "a-long-random-token",
		"tenant_id": "tenant_a",
		"max_payload_size": "2m",
		"signature": {"header": "X-Hub-Signature-256", "secret": "s3cret", "prefix": "sha256="},
		"collector_config": {
			"event_type": "${commits[0].committer.name}",
			"payload": {"source": "github", "ref": "${ref}", "all": "${@}"}
		}
	}`)
	if w.ID != "github_repository" || w.TenantID != "tenant_a" || w.MaxPayloadSize != 2<<20 {
		t.Errorf("got %+v", w)
	}
	if s := w.Signature; s == nil || s.Scheme() != signing.SchemeHMAC || s.Header() != "X-Hub-Signature-256" {
		t.Errorf("signature = %v", s)
	}
	if w.Collector() == nil {
		t.Error("no collector")
	}
	if err := w.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	// Defaults of the optional fields.
	w = mustParse(t, `{"id": "h", "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {}}}`)
	if w.MaxPayloadSize != DefaultMaxPayloadSize || w.TenantID != "" || w.Signature != nil {
		t.Errorf("defaults: %+v", w)
	}
	// Optional fields given as null count as absent.
	w = mustParse(t, `{"id": "h", "token": "a-long-test-token", "tenant_id": null, "max_payload_size": null, "signature": null,
		"collector_config": {"event_type": "e", "payload": {}}}`)
	if w.MaxPayloadSize != DefaultMaxPayloadSize || w.TenantID != "" || w.Signature != nil {
		t.Errorf("nulls: %+v", w)
	}
}

func TestParse_Bad(t *testing.T) {
	t.Parallel()
	// File in testdata/bad → substrings the error must contain.
	tests := map[string][]string{
		"not_json":                               {"(file): invalid JSON"},
		"not_object":                             {"(file): must be a JSON object"},
		"trailing_data":                          {"(file): invalid JSON: unexpected data after the JSON value"},
		"missing_id":                             {"id: required"},
		"empty_id":                               {"id: must not be empty"},
		"id_not_string":                          {"id: must be a string"},
		"id_bad_chars":                           {`id "hook with space": must contain only ASCII letters`},
		"id_slash":                               {`id "a/b": must contain only`},
		"id_dotdot":                              {`id "..": must not be "." or ".."`},
		"id_too_long":                            {"longer than 128 bytes"},
		"missing_token":                          {"token: required"},
		"empty_token":                            {"token: must not be empty"},
		"token_not_string":                       {"token: must be a string"},
		"unknown_field":                          {"tokn: unknown field"},
		"field_case":                             {"ID: unknown field"},
		"duplicate_field":                        {"token: duplicate field"},
		"unknown_nested_field":                   {"collector_config.evnt_type: unknown field (allowed: event_type, payload)"},
		"missing_collector_config":               {"collector_config: required"},
		"collector_config_not_object":            {"collector_config: must be a JSON object"},
		"missing_event_type":                     {"collector_config.event_type: required"},
		"empty_event_type":                       {"collector_config.event_type: must not be empty"},
		"event_type_not_string":                  {"collector_config.event_type: must be a string"},
		"bad_event_type_expression":              {`collector_config.event_type "${a[}": invalid JMESPath expression`},
		"missing_payload":                        {"collector_config.payload: required"},
		"payload_null":                           {"collector_config.payload: required"},
		"payload_not_object":                     {"collector_config.payload: must be a JSON object"},
		"bad_expression":                         {`collector_config.payload.ref "${foo[}": invalid JMESPath expression: SyntaxError`},
		"nested_bad_expression":                  {`collector_config.payload.inner.list[1] "${a..b}": invalid JMESPath expression`},
		"quoted_key_bad_expression":              {`collector_config.payload["a.b"] "${}": invalid JMESPath expression`},
		"two_expressions_in_one_string":          {`collector_config.payload.text "${a} and ${b}": invalid JMESPath expression`},
		"unknown_function":                       {"collector_config.payload.n", "unknown function nope()"},
		"max_payload_size_invalid":               {`max_payload_size "invalid": must be a positive whole number of bytes`},
		"max_payload_size_zero":                  {`max_payload_size "0": must be a positive`},
		"max_payload_size_negative":              {`max_payload_size "-1": must be a positive`},
		"max_payload_size_fraction":              {`max_payload_size "1.5": must be a positive`},
		"max_payload_size_unit_only":             {`max_payload_size "m": must be a positive`},
		"max_payload_size_bad_unit":              {`max_payload_size "2t": must be a positive`},
		"max_payload_size_bool":                  {`max_payload_size "true": must be a positive`},
		"max_payload_size_overflow":              {`max_payload_size "9999999999999g": must be a positive`},
		"tenant_empty":                           {"tenant_id: must not be empty"},
		"tenant_not_string":                      {"tenant_id: must be a string"},
		"signature_not_object":                   {"signature: must be a JSON object"},
		"signature_missing_secret":               {"signature.secret: required"},
		"signature_empty_secret":                 {"signature.secret: must not be empty"},
		"signature_missing_header":               {"signature.header: required"},
		"signature_bad_header":                   {`signature.header "X Hub": must be an HTTP header name`},
		"signature_bad_encoding":                 {`signature.encoding "base32": must be "hex" or "base64"`},
		"signature_unknown_field":                {"signature.hash: unknown field"},
		"signature_unknown_scheme":               {`signature.scheme "svix": unknown scheme (known: github, standard-webhooks, stripe, slack, hmac)`},
		"signature_bad_tolerance":                {`signature.tolerance "soon": must be a positive duration`},
		"signature_negative_tolerance":           {`signature.tolerance "-5m": must be a positive duration`},
		"signature_tolerance_without_timestamp":  {`signature.tolerance "5m0s": only for schemes with a timestamp`},
		"signature_option_of_other_scheme":       {`signature.header "X-Sig": only for the hmac scheme`},
		"signature_bad_content":                  {`signature.content "{body}.{body}": must contain {body} exactly once`},
		"signature_content_unknown_placeholder":  {`signature.content "{id}.{body}": unknown placeholder`},
		"signature_content_without_timestamp":    {`signature.content "{body}": must contain {timestamp}`},
		"signature_bad_algorithm":                {`signature.algorithm "sha1": must be "sha256" or "sha512"`},
		"signature_secret_and_secrets":           {"signature.secrets: give secret or secrets, not both"},
		"signature_secrets_empty":                {"signature.secrets: must not be empty"},
		"signature_secrets_not_array":            {"signature.secrets: must be an array of strings or objects"},
		"signature_secret_two_sources":           {`signature.secrets[0]: needs exactly one of "value", "file" and "env"`},
		"signature_secret_no_source":             {`signature.secrets[0]: needs exactly one of "value", "file" and "env"`},
		"signature_secret_unknown_field":         {"signature.secrets[0].expires: unknown field"},
		"signature_secret_bad_not_after":         {`signature.secrets[0].not_after "2030-01-01": must be an RFC 3339 time`},
		"signature_secret_file_missing":          {`signature.secrets[0].file "does-not-exist.secret": open: no such file or directory`},
		"signature_secret_env_unset":             {`signature.secrets[0].env "SQUALL_TEST_UNSET_VARIABLE": environment variable unset or empty`},
		"signature_standard_webhooks_bad_secret": {`signature.secret: must be "whsec_" followed by base64`},
		"token_and_tokens":                       {"tokens: give token or tokens, not both"},
		"tokens_empty":                           {"tokens: must not be empty"},
		"tokens_empty_entry":                     {"tokens[1]: must not be empty"},
		"tokens_too_many":                        {"tokens: more than 16 entries"},
		"several_problems":                       {`id "bad id"`, "token: required", `max_payload_size "0"`},
	}
	files, err := filepath.Glob("testdata/bad/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, ok := tests[name]
			if !ok {
				t.Fatalf("no expected error for %s: add it to the table", file)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Parse(bytes.NewReader(data))
			if err == nil {
				t.Fatalf("Parse succeeded: %v", w)
			}
			for _, sub := range want {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q\ndoes not contain %q", err, sub)
				}
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("error %v is not a *ValidationError", err)
			}
			if strings.Contains(err.Error(), leakToken) || strings.Contains(err.Error(), leakSecret) {
				t.Errorf("error leaks a secret: %v", err)
			}
		})
	}
	for name := range tests {
		if !seen[name] {
			t.Errorf("testdata/bad/%s.json is missing", name)
		}
	}
}

func TestParse_Limits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{
			name: "file too large",
			doc:  `{"id": "h", "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {"x": "` + strings.Repeat("a", MaxFileSize) + `"}}}`,
			want: "(file): larger than 1048576 bytes",
		},
		{
			name: "expression too long",
			doc:  `{"id": "h", "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {"x": "${` + strings.Repeat("a", MaxExpressionLen+1) + `}"}}}`,
			want: "expression longer than 4096 bytes",
		},
		{
			name: "jmespath lexer panic",
			doc:  `{"id": "h", "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {"x": "${a\u0080}"}}}`,
			want: "collector_config.payload.x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want it to contain %q", err, tt.want)
			}
		})
	}

	// A read error is passed on.
	_, err := Parse(iotest.ErrReader(errors.New("disk on fire")))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("read error = %v", err)
	}

	// The longest allowed id and expression load.
	long := fmt.Sprintf(`{"id": %q, "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {"x": "${%s}"}}}`,
		strings.Repeat("i", MaxIDLen), strings.Repeat("a", MaxExpressionLen))
	mustParse(t, long)
}

func TestParse_MaxPayloadSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string // JSON
		want  int64
	}{
		{`12345`, 12345},
		{`"12345"`, 12345},
		{`"2m"`, 2 << 20},
		{`"2M"`, 2 << 20},
		{`"1k"`, 1024},
		{`"1kb"`, 1024},
		{`"1KiB"`, 1024},
		{`"3mb"`, 3 << 20},
		{`"3MiB"`, 3 << 20},
		{`"1g"`, 1 << 30},
		{`"1GB"`, 1 << 30},
		{`"1gib"`, 1 << 30},
		{`9223372036854775807`, 1<<63 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			w := mustParse(t, `{"id": "h", "token": "a-long-test-token", "max_payload_size": `+tt.value+`,
				"collector_config": {"event_type": "e", "payload": {}}}`)
			if w.MaxPayloadSize != tt.want {
				t.Errorf("MaxPayloadSize = %d, want %d", w.MaxPayloadSize, tt.want)
			}
		})
	}
}

func TestWebhook_CheckToken(t *testing.T) {
	t.Parallel()
	w := mustParse(t, `{"id": "h", "token": "A-Long-Random-Token", "collector_config": {"event_type": "e", "payload": {}}}`)
	tests := []struct {
		tok  string
		want bool
	}{
		{"A-Long-Random-Token", true},
		{"a-long-random-token", false}, // case-sensitive
		{"A-Long-Random-Toke", false},
		{"A-Long-Random-Token ", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := w.CheckToken(tt.tok); got != tt.want {
			t.Errorf("CheckToken(%q) = %v, want %v", tt.tok, got, tt.want)
		}
	}
	// A Webhook without a token accepts nothing, not even the empty token.
	var zero Webhook
	if zero.CheckToken("") {
		t.Error("zero Webhook accepted the empty token")
	}
}

func TestWebhook_Redaction(t *testing.T) {
	t.Parallel()
	w := mustParse(t, `{"id": "h", "token": "`+leakToken+`", "tenant_id": "ten",
		"signature": {"header": "X-Sig", "secret": "`+leakSecret+`"},
		"collector_config": {"event_type": "e", "payload": {}}}`)

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("loaded", "webhook", w, "value", *w, "signature", w.Signature)
	logger.Info("loaded", slog.Any("webhook", w))

	outputs := []string{
		w.String(),
		fmt.Sprint(w), fmt.Sprint(*w),
		fmt.Sprintf("%v %+v %#v %s %q %x %d", w, w, w, w, w, w, w),
		fmt.Sprintf("%v %+v %#v %s %x %d", *w, *w, *w, *w, *w, *w),
		fmt.Sprintf("%v %+v %#v %d", w.Signature, *w.Signature, w.Signature, w.Signature),
		logs.String(),
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(b))
	for _, out := range outputs {
		if strings.Contains(out, leakToken) || strings.Contains(out, leakSecret) {
			t.Errorf("output leaks a secret: %s", out)
		}
	}
	if !strings.Contains(w.String(), "webhook h") || !strings.Contains(w.String(), "token=[redacted]") {
		t.Errorf("String() = %q", w.String())
	}
	if !strings.Contains(logs.String(), `"webhook":{"id":"h","max_payload_size":5242880,"tenant_id":"ten","signature":{"scheme":"hmac","header":"X-Sig","secrets":1}}`) {
		t.Errorf("log = %s", logs.String())
	}
}

func TestWebhook_Validate(t *testing.T) {
	t.Parallel()
	good := func() *Webhook {
		return mustParse(t, `{"id": "h", "token": "a-long-test-token", "signature": {"header": "X-Sig", "secret": "s"},
			"collector_config": {"event_type": "e", "payload": {}}}`)
	}
	tests := []struct {
		name   string
		change func(w *Webhook)
		want   string
	}{
		{"ok", func(*Webhook) {}, ""},
		{"bad id", func(w *Webhook) { w.ID = "a b" }, `id "a b"`},
		{"no id", func(w *Webhook) { w.ID = "" }, "id: required"},
		{"zero size", func(w *Webhook) { w.MaxPayloadSize = 0 }, `max_payload_size "0"`},
		{"zero value", func(w *Webhook) { *w = Webhook{} }, "token: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := good()
			tt.change(w)
			err := w.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
