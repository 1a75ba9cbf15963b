package tree

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
)

// TestArenaStrings checks what arenaString relies on: the strings of a
// decoded event (its type, trace id, and the keys and values of its
// payload and metadata, escaped ones included) stay what the event said
// after the caller overwrote the bytes it decoded and other events of the
// same size were decoded and collected. It fails if DecodeEvent kept the
// caller's bytes instead of a copy, or if an event's arena were reused.
func TestArenaStrings(t *testing.T) {
	t.Parallel()
	const src = `{"type":"t\u00e9st","created_ms":1,"trace_id":"trace-1",` +
		`"payload":{"k\"ey":"v\\al","n":12.5,"list":["a","b\nc"],"obj":{"x":"y"}},"metadata":{"m":"mv"}}`
	var want struct {
		Type     string         `json:"type"`
		TraceID  string         `json:"trace_id"`
		Payload  map[string]any `json:"payload"`
		Metadata map[string]any `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(src)))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}

	data := []byte(src)
	ev, err := DecodeEvent(data)
	if err != nil {
		t.Fatal(err)
	}
	typ, traceID := ev.Type, ev.TraceID
	payload, metadata := ev.Payload(), ev.Metadata()
	key, _, _ := ev.lookupString("payload", nil)

	// The caller reuses its buffer; more events of the same size take the
	// pooled node lists and whatever else might be reused.
	other := []byte(src)
	for _, r := range [][2]string{{"trace-1", "trace-9"}, {`"mv"`, `"zz"`}, {`"y"`, `"q"`}, {`v\\al`, `w\\bl`}, {`"a"`, `"b"`}} {
		other = bytes.ReplaceAll(other, []byte(r[0]), []byte(r[1]))
	}
	for range 100 {
		copy(data, other)
		if _, err := DecodeEvent(data); err != nil {
			t.Fatal(err)
		}
	}
	for i := range data {
		data[i] = '#'
	}
	runtime.GC()

	if typ != want.Type || traceID != want.TraceID {
		t.Errorf("type %q, trace id %v; want %q, %q", typ, traceID, want.Type, want.TraceID)
	}
	if !reflect.DeepEqual(payload, want.Payload) || !reflect.DeepEqual(metadata, want.Metadata) {
		t.Errorf("payload %v, metadata %v; want %v, %v", payload, metadata, want.Payload, want.Metadata)
	}
	if key != "" {
		t.Errorf("the payload read as a string: %q", key)
	}
	// The same event read again, after all that, gives the same values.
	if got := ev.Payload(); !reflect.DeepEqual(got, want.Payload) {
		t.Errorf("payload read again %v, want %v", got, want.Payload)
	}
}

// TestArenaString_bounds checks that arenaString refuses bounds outside
// its arena instead of reading past it.
func TestArenaString_bounds(t *testing.T) {
	t.Parallel()
	arena := []byte("abcdef")
	if got := arenaString(arena[:4], 1, 3); got != "bc" {
		t.Fatalf("got %q", got)
	}
	for _, b := range [][2]int{{2, 5}, {3, 2}, {-1, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("arenaString(%d, %d) of 4 bytes did not panic", b[0], b[1])
				}
			}()
			_ = arenaString(arena[:4], b[0], b[1])
		}()
	}
}
