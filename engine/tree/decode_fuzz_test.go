package tree

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeEvent checks the decoded payload and metadata (strings built in
// the decoder's arena) against encoding/json's decoding with UseNumber, for
// events both accept.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(`{"type": "t", "created_ms": 1, "payload": {"a": "x\u00e9\"\\", "b": [1, 2.5e3, true, null, {"c": "\ud83d\ude00"}]}, "metadata": {"k": "v"}}`)
	f.Add(`{"type": "t", "created_ms": 1, "payload": {"a": "", "": 0, "dup": 1, "dup": "2"}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !utf8.ValidString(raw) || strings.Contains(raw, `\ud`) || strings.Contains(raw, `\uD`) {
			return // both replace invalid text and lone surrogates, not always alike
		}
		ev, err := DecodeEvent([]byte(raw))
		if err != nil {
			return
		}
		// A map, not a struct: encoding/json matches struct fields without
		// regard to case ("metAdAtA" would fill Metadata), events' fields
		// are matched exactly.
		var top map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.UseNumber()
		if dec.Decode(&top) != nil {
			return
		}
		payload, _ := top["payload"].(map[string]any)
		if !reflect.DeepEqual(ev.Payload(), payload) {
			t.Errorf("payload %#v, encoding/json %#v", ev.Payload(), payload)
		}
		if metadata, ok := top["metadata"].(map[string]any); ok && !reflect.DeepEqual(ev.Metadata(), metadata) {
			t.Errorf("metadata %#v, encoding/json %#v", ev.Metadata(), metadata)
		}
	})
}
