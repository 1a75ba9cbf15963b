package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse parses arbitrary webhook files: Parse must not panic, and what it
// accepts must be a valid, usable webhook.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/webhooks", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"id": "h", "token": "a-long-test-token", "max_payload_size": "1KiB", "tenant_id": "x",
		"signature": {"header": "X-Sig", "secret": "s", "prefix": "v1=", "encoding": "base64"},
		"collector_config": {"event_type": "${a}", "payload": {"l": [1, "${b[?c > ` + "`1`" + `]}"], "m": {"n": null}}}}`))
	f.Add([]byte(`{"id": "h", "token": "a-long-test-token", "collector_config": {"event_type": "${a\u0080}", "payload": {}}}`))
	f.Add([]byte(`{"id": "h", "tokens": ["a-long-test-token", {"value": "another-long-token", "not_after": "2030-01-01T00:00:00Z"}],
		"signature": {"scheme": "hmac", "header": "X-Sig", "algorithm": "sha512", "timestamp_header": "X-Ts",
			"content": "{timestamp}:{body}", "tolerance": "90s", "secrets": ["a", {"value": "b"}]},
		"collector_config": {"event_type": "e", "payload": {}}}`))
	f.Add([]byte(`{"id": "h", "token": "a-long-test-token", "signature": {"scheme": "standard-webhooks", "secret": "whsec_YWJj"},
		"collector_config": {"event_type": "e", "payload": {}}}`))
	f.Add([]byte(`{"id": "h", "token": "a-long-test-token", "dedupe": {"jmespath": "data.id", "window": "90m"},
		"rate_limit": {"rate": 0.5, "burst": 3, "per_client": true}, "allow_ips": ["10.0.0.0/8", "2001:db8::1"],
		"collector_config": {"event_type": "e", "payload": {}}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(bytes.NewReader(data))
		if err != nil {
			if w != nil {
				t.Fatal("Parse returned a webhook and an error")
			}
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("parsed webhook does not validate: %v", err)
		}
		if w.Collector() == nil {
			t.Fatal("no collector")
		}
		var file struct{ Token string }
		if err := json.Unmarshal(data, &file); err == nil && file.Token != "" {
			if !w.CheckToken(file.Token) || w.CheckToken(file.Token+"x") {
				t.Fatal("CheckToken does not match the file's token")
			}
		}
		_ = w.String()
	})
}

// FuzzCollect compiles an arbitrary collector_config and runs it on an
// arbitrary body: Collect must not panic, must classify every error, and
// must produce events that marshal to JSON.
func FuzzCollect(f *testing.F) {
	for _, name := range tornadoCases {
		config, err1 := os.ReadFile(filepath.Join("testdata", "jmespath", name+"_config.json"))
		input, err2 := os.ReadFile(filepath.Join("testdata", "jmespath", name+"_input.json"))
		if err1 == nil && err2 == nil {
			f.Add(config, input)
		}
	}
	seeds := []struct{ config, body string }{
		{`{"event_type": "e", "payload": {"a": "${@}"}}`, `{"x": [1, 1.0, 12345678901234567890, 1e400, -0]}`},
		{`{"event_type": "${t}", "payload": {"n": "${length(@)}", "s": "${sort_by(l, &n)}"}}`, `{"t": "x", "l": [{"n": 2}, {"n": 1}]}`},
		{`{"event_type": "e", "payload": {"f": "${l[?n > ` + "`1`" + `].n}", "m": "${max(l[*].n)}"}}`, `{"l": [{"n": 2}, {"n": 1}]}`},
		{`{"event_type": "e", "payload": {"m": "${merge(@)}", "x": "${&a}"}}`, `1`},
		{`{"event_type": "e", "payload": {"s": "${sum(@)}", "a": "${avg(@)}"}}`, `[1e308, 1e308]`},
		{`{"event_type": "e", "payload": {"t": "${to_string(@)}", "k": "${keys(@)}"}}`, `{"a": {"b": [true, null]}}`},
		{`{"event_type": "e", "payload": {}}`, "\xff"},
		{`{"event_type": "e", "payload": {"x": "${a}"}}`, `{"a": "` + strings.Repeat("[", 100) + `"}`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.config), []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, config, body []byte) {
		cfg, err := decodeCollectorConfig(config)
		if err != nil {
			return
		}
		c, err := NewCollector(cfg, "")
		if err != nil {
			return
		}
		ev, err := c.Collect(body, testNow, "tenant")
		checkAppendEvent(t, c, body)
		bodyOK := utf8.Valid(body) && json.Valid(body)
		if err != nil {
			var te *TemplateError
			switch {
			case errors.Is(err, ErrBodyNotJSON):
				if bodyOK {
					t.Fatalf("valid body reported as not JSON: %v", err)
				}
			case errors.As(err, &te):
				if !bodyOK {
					t.Fatalf("invalid body reported as a template error: %v", err)
				}
			default:
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if !bodyOK {
			t.Fatal("invalid body accepted")
		}
		if ev.Type == "" || ev.Metadata["tenant_id"] != "tenant" || ev.Payload == nil {
			t.Fatalf("bad event: %+v", ev)
		}
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("event does not marshal: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("event marshals to invalid JSON: %s", out)
		}
	})
}

// directConfigs are templates that AppendEvent may write straight from the
// body, and one it may not.
var directConfigs = []string{
	`{"event_type": "e", "payload": {"all": "${@}"}}`,
	`{"event_type": "e\u2028\"", "payload": {"z": "${ @ }", "a": ["${@}", 1.5, null, {"k": "${@}"}], "m": {"t": true}}}`,
	`{"event_type": "e", "payload": {"n": 12345678901234567890, "s": "<x>"}}`,
	`{"event_type": "e", "payload": {"all": "${@}", "k": "${kind}"}}`,
}

// FuzzCollector_AppendEvent checks that AppendEvent writes exactly what
// Event.AppendJSON writes of Collect's event, with the same errors, whichever
// path it takes.
func FuzzCollector_AppendEvent(f *testing.F) {
	for _, name := range tornadoCases {
		if input, err := os.ReadFile(filepath.Join("testdata", "jmespath", name+"_input.json")); err == nil {
			f.Add(uint8(0), input)
		}
	}
	for i, body := range directBodies {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		cfg, err := decodeCollectorConfig([]byte(directConfigs[int(which)%len(directConfigs)]))
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCollector(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		checkAppendEvent(t, c, body)
	})
}

// checkAppendEvent compares AppendEvent with Collect and Event.AppendJSON.
func checkAppendEvent(t *testing.T, c *Collector, body []byte) {
	t.Helper()
	want, wantErr := c.Collect(body, testNow, "tenant")
	var wantJSON []byte
	if wantErr == nil {
		wantJSON, wantErr = want.AppendJSON([]byte("prefix"))
	}
	got, tenant, err := c.AppendEvent([]byte("prefix"), body, testNow, "tenant")
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("body %q: error %v, want %v", body, err, wantErr)
	}
	if err == nil && (!bytes.Equal(got, wantJSON) || tenant != "tenant") {
		t.Fatalf("body %q:\n got %s (tenant %q)\nwant %s", body, got, tenant, wantJSON)
	}
}
