package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestDedupeWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		size  int
		ops   []string // "+id" adds, "?id" expects seen, "!id" expects not seen
		count int
	}{
		{"remembers", 3, []string{"!a", "+a", "?a", "!b"}, 1},
		{"forgets the oldest when full", 2, []string{"+a", "+b", "+c", "!a", "?b", "?c"}, 2},
		{"adding twice keeps one entry", 2, []string{"+a", "+a", "+b", "?a", "?b"}, 2},
		{"size 0 remembers nothing", 0, []string{"+a", "!a"}, 0},
		{"an empty id is never seen", 2, []string{"+", "!"}, 0},
		{"uuids of either case are one id", 2, []string{
			"+0190c8a4-8e4b-7c2a-9e5d-1a2b3c4d5e6f", "?0190C8A4-8E4B-7C2A-9E5D-1A2B3C4D5E6F",
			"!0190c8a4-8e4b-7c2a-9e5d-1a2b3c4d5e60"}, 1},
		{"other ids are hashed", 3, []string{"+delivery-1", "?delivery-1", "!delivery-2",
			"+0190c8a4-8e4b-7c2a-9e5d-1a2b3c4d5e6x", "?0190c8a4-8e4b-7c2a-9e5d-1a2b3c4d5e6x"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDedupeWindow(tt.size, 0)
			for i, op := range tt.ops {
				id := []byte(op[1:])
				switch op[0] {
				case '+':
					d.add(id)
				case '?':
					if !d.seen(id) {
						t.Fatalf("op %d: %s not seen", i, id)
					}
				case '!':
					if d.seen(id) {
						t.Fatalf("op %d: %s seen", i, id)
					}
				}
			}
			if d.len() != tt.count {
				t.Errorf("%d ids, want %d", d.len(), tt.count)
			}
		})
	}
}

func TestDedupeWindow_Expires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		d := newDedupeWindow(10, time.Minute)
		d.add([]byte("a"))
		time.Sleep(40 * time.Second)
		d.add([]byte("b"))
		if !d.seen([]byte("a")) || !d.seen([]byte("b")) {
			t.Fatal("forgot too early")
		}
		time.Sleep(30 * time.Second) // a is 70s old, b 30s
		if d.seen([]byte("a")) {
			t.Error("a is older than a minute and still seen")
		}
		if !d.seen([]byte("b")) {
			t.Error("b forgotten too early")
		}
		if d.len() != 1 {
			t.Errorf("%d ids, want 1", d.len())
		}
		time.Sleep(31 * time.Second)
		if d.seen([]byte("b")) || d.len() != 0 {
			t.Error("b not forgotten")
		}
	})
}

func TestParseUUID(t *testing.T) {
	t.Parallel()
	k, ok := parseUUID([]byte("00112233-4455-6677-8899-aabbccddeeff"))
	if !ok || fmt.Sprintf("%x", k) != "00112233445566778899aabbccddeeff" {
		t.Errorf("got %x %v", k, ok)
	}
	for _, bad := range []string{"", "00112233445566778899aabbccddeeff", "00112233-4455-6677-8899-aabbccddeeg0", "0011223-34455-6677-8899-aabbccddeeff"} {
		if _, ok := parseUUID([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// BenchmarkDedupeWindow measures a seen check and an add, once per event.
func BenchmarkDedupeWindow(b *testing.B) {
	d := newDedupeWindow(DefaultDedupeSize, DefaultDedupeMaxAge)
	ids := make([][]byte, 1<<16)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "0190c8a4-8e4b-7c2a-9e5d-%012x", i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		id := ids[i%len(ids)]
		if !d.seen(id) {
			d.add(id)
		}
		i++
	}
}
