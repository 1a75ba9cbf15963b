package action

import (
	"bytes"
	stdjson "encoding/json"
	"testing"

	"github.com/segmentio/encoding/json"

	"github.com/squallhq/squall/engine/tree"
)

// encodeLine encodes v as the archive does.
func encodeLine(t testing.TB, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// stdLine encodes v as encoding/json does with the same settings.
func stdLine(t testing.TB, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := stdjson.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestArchiveEncoding: archive lines are what encoding/json writes for the
// values decoded events and action payloads hold (maps with sorted keys,
// json.Number, escapes, invalid UTF-8).
func TestArchiveEncoding(t *testing.T) {
	for _, raw := range []string{
		`{"type": "t", "created_ms": 1, "payload": {"b": 1, "a": [1.50, -2e3, true, null, "x"], "html": "<a href='x'>&amp;</a>",
		  "ctl": "\u0000\u001f\t\n\r\"\\/", "uni": "é😀\u2028\u2029", "nested": {"z": {"y": []}, "x": {}}}}`,
		`{"type": "t", "created_ms": 1, "metadata": {"tenant_id": "a"}, "payload": {"big": 123456789012345678901234567890, "f": 0.1}}`,
	} {
		ev, err := tree.DecodeEvent([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		v := map[string]any{"payload": ev.Payload(), "metadata": ev.Metadata(), "type": ev.Type, "n": stdjson.Number("12")}
		if got, want := encodeLine(t, v), stdLine(t, v); got != want {
			t.Errorf("archive line\n%s\nencoding/json\n%s", got, want)
		}
	}
	bad := map[string]any{"s": "a\xffb\xc3", "k\xfe": []any{"\xed\xa0\x80"}}
	if got, want := encodeLine(t, bad), stdLine(t, bad); got != want {
		t.Errorf("invalid UTF-8: archive line\n%s\nencoding/json\n%s", got, want)
	}
}

// FuzzArchiveEncoding compares the archive's encoding of decoded events
// with encoding/json's.
func FuzzArchiveEncoding(f *testing.F) {
	f.Add(`{"type": "t", "created_ms": 1, "payload": {"a": "<&>", "b": [1, 2.5, "\u00e9"]}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		ev, err := tree.DecodeEvent([]byte(raw))
		if err != nil {
			return
		}
		v := map[string]any{"payload": ev.Payload(), "metadata": ev.Metadata()}
		if got, want := encodeLine(t, v), stdLine(t, v); got != want {
			t.Errorf("archive line\n%s\nencoding/json\n%s", got, want)
		}
	})
}
