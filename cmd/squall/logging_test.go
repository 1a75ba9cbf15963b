package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestNewLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l, err := newLogger(&buf, "debug")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("x", "duration", 1500*time.Millisecond, "n", 3)
	if got := buf.String(); !strings.Contains(got, `"duration":"1.5s"`) || !strings.Contains(got, `"n":3`) {
		t.Errorf("log line %s: want the duration as text", got)
	}
	if _, err := newLogger(&buf, "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
}

// checkLogLines fails the test for a log line that is not a JSON object,
// repeats a key at some level, holds an empty address, or writes a
// duration as a number.
func checkLogLines(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if line == "" {
			continue
		}
		if err := checkJSONKeys(json.NewDecoder(strings.NewReader(line))); err != nil {
			t.Errorf("log line %s: %v", line, err)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %s: %v", line, err)
			continue
		}
		for k, v := range m {
			if (k == "http" || strings.HasSuffix(k, "_addr")) && v == "" {
				t.Errorf("log line %s: empty %s", line, k)
			}
			if _, isNumber := v.(float64); isNumber && (k == "duration" || strings.HasSuffix(k, "_timeout") || strings.HasSuffix(k, "_interval")) {
				t.Errorf("log line %s: %s is a number, want text such as \"1.5s\"", line, k)
			}
		}
	}
}

// checkJSONKeys reads one JSON value and reports an object key given twice.
func checkJSONKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q given twice", key)
			}
			seen[key] = true
			if err := checkJSONKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := checkJSONKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

func TestCheckJSONKeys(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":1,"b":{"a":2},"c":[{"a":1}]}`:          "",
		`{"component":"intake","component":"spool"}`: `key "component" given twice`,
		`{"x":[{"a":1,"a":2}]}`:                      `key "a" given twice`,
	} {
		err := checkJSONKeys(json.NewDecoder(strings.NewReader(in)))
		if (want == "" && err != nil && !errors.Is(err, io.EOF)) || (want != "" && (err == nil || err.Error() != want)) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
