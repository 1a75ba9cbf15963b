package satellite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/satellite/intake"
)

// TestToMessage checks that an event's message carries its key, value,
// headers and time, whether its headers and key fit in the one allocation
// of the usual event or not.
func TestToMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		key     string
		headers int
	}{
		{"usual", "tenant-1", 5},
		{"no key, no header", "", 0},
		{"many headers", "tenant-1", 7},
		{"long key", strings.Repeat("k", 100), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := intake.Record{Key: tc.key, Value: []byte(`{"a":1}`), Time: time.UnixMilli(1_700_000_000_000)}
			for i := range tc.headers {
				rec.Headers = append(rec.Headers, intake.Header{Key: fmt.Sprint("h", i), Value: fmt.Appendf(nil, "v%d", i)})
			}
			m := toMessage(rec)
			if string(m.Key) != tc.key || m.Key == nil {
				t.Fatalf("key %q (nil %t), want %q", m.Key, m.Key == nil, tc.key)
			}
			if string(m.Value) != `{"a":1}` || !m.Time.Equal(rec.Time) {
				t.Fatalf("value %s, time %v", m.Value, m.Time)
			}
			if len(m.Headers) != tc.headers || cap(m.Headers) != tc.headers {
				t.Fatalf("%d headers (cap %d), want %d", len(m.Headers), cap(m.Headers), tc.headers)
			}
			for i, h := range m.Headers {
				if h.Key != rec.Headers[i].Key || string(h.Value) != string(rec.Headers[i].Value) {
					t.Fatalf("header %d: %s=%s, want %s=%s", i, h.Key, h.Value, rec.Headers[i].Key, rec.Headers[i].Value)
				}
			}
		})
	}
}
