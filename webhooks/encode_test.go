package webhooks

import (
	"bytes"
	"encoding/json"
	"testing"
)

// marshalStd is the reference: encoding/json without HTML escaping.
func marshalStd(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func TestEvent_AppendJSON(t *testing.T) {
	t.Parallel()
	for _, payload := range []map[string]any{
		{},
		{"s": "plain", "html": "<a href='x'>&amp;</a>", "ctl": "\x00\x01\x1f\t\n\r\b\f\"\\", "u": "ünï \u2028 \u2029 😀"},
		{"bad": "\xff\xfe ok \xc3", "n": json.Number("12345678901234567890"), "f": json.Number("-1.50e+10"), "z": json.Number("0")},
		{"nested": map[string]any{"b": []any{nil, true, false, json.Number("1"), "x", map[string]any{}}, "a": []any{}}},
		{"nil map": map[string]any(nil), "nil slice": []any(nil), "other": []string{"x"}, "int": 3},
		{"empty number": json.Number("")},
	} {
		ev := Event{Type: "t\"ype", CreatedMs: 1700000000123, Metadata: map[string]any{"tenant_id": "acme"}, Payload: payload}
		want, err := marshalStd(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ev.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
	}
	for _, bad := range []json.Number{"1.", "01x", "true", "--1", "1e"} {
		_, err := Event{Payload: map[string]any{"n": bad}}.AppendJSON(nil)
		if _, stdErr := marshalStd(map[string]any{"n": bad}); (err == nil) != (stdErr == nil) {
			t.Errorf("number %q: error %v, encoding/json %v", bad, err, stdErr)
		}
	}
}

func FuzzEvent_AppendJSON(f *testing.F) {
	f.Add(`{"a": [1, "x", {"b": null}], "c": "\u2028<&>"}`, "type")
	f.Add(`"\ud800"`, "\xff")
	f.Fuzz(func(t *testing.T, body, typ string) {
		var v any
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		ev := Event{Type: typ, CreatedMs: 5, Metadata: map[string]any{"tenant_id": typ}, Payload: map[string]any{"all": v, typ: typ}}
		want, err := marshalStd(ev)
		if err != nil {
			return
		}
		got, err := ev.AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("\n got %s (%v)\nwant %s", got, err, want)
		}
	})
}
