package findings

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

const goodInsert = `{"monitored_domain_id": 1, "tool_code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`

// TestDecodeInsert_Strict: what docs/findings.md rules out and the
// decoders would take (invalid UTF-8 stored as U+FFFD, the last of
// repeated keys, keys matched case-insensitively) is refused, naming the
// problem.
func TestDecodeInsert_Strict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body  string
		code, field string // FieldError; "" for errBadBody
	}{
		{name: "invalid UTF-8", body: "{\"monitored_domain_id\": 1, \"tool_code\": \"t\", \"resource_url\": \"https://example.com/\", \"username\": \"\xff\", \"password\": \"p\"}"},
		{name: "invalid UTF-8 in a key", body: "{\"\xff\": 1}"},
		{name: "duplicate key", body: `{"monitored_domain_id": 1, "tool_code": "t", "tool_code": "u", "resource_url": "https://example.com/", "username": "u", "password": "p"}`, code: "DUPLICATE_FIELD", field: "tool_code"},
		{name: "escaped duplicate key", body: `{"monitored_domain_id": 1, "tool_code": "t", "tool_\u0063ode": "u", "resource_url": "https://example.com/", "username": "u", "password": "p"}`, code: "DUPLICATE_FIELD", field: "tool_code"},
		{name: "case-folded key", body: `{"monitored_domain_id": 1, "Tool_Code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`, code: "UNKNOWN_FIELD", field: "Tool_Code"},
		{name: "case-folded only key", body: `{"PASSWORD": "p"}`, code: "UNKNOWN_FIELD", field: "PASSWORD"},
		{name: "deep array", body: strings.Repeat("[", 1<<20)},
		{name: "deep object", body: `{"username": ` + strings.Repeat(`{"a":`, 1<<20/5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b insertBody
			err := decodeInsert([]byte(tc.body), &b)
			var fe *FieldError
			switch {
			case err == nil:
				t.Fatalf("accepted: %+v", b)
			case tc.code == "":
				if !errors.Is(err, errBadBody) {
					t.Fatalf("got %v, want a bad body", err)
				}
			case !errors.As(err, &fe) || fe.Code != tc.code || fe.Field != tc.field:
				t.Fatalf("got %v, want %s on %s", err, tc.code, tc.field)
			}
		})
	}
	var b insertBody
	if err := decodeInsert([]byte(goodInsert), &b); err != nil {
		t.Fatalf("good body: %v", err)
	}
}

func TestDecodePatch_Strict(t *testing.T) {
	t.Parallel()
	for body, code := range map[string]string{
		`{"state": "Resolved", "state": "Ignored"}`: "DUPLICATE_FIELD",
		`{"State": "Resolved"}`:                     "UNKNOWN_FIELD",
		"{\"ticket\": \"\xff\"}":                    "",
		strings.Repeat("[", 1<<20):                  "",
	} {
		_, err := decodePatch([]byte(body))
		var fe *FieldError
		if code == "" && !errors.Is(err, errBadBody) || code != "" && (!errors.As(err, &fe) || fe.Code != code) {
			t.Errorf("%.40q: got %v, want %q", body, err, code)
		}
	}
}

// TestDecodeInsert_HostileMemory: a hostile 1 MiB body costs under 20 MB,
// heap and stack: segmentio's decoder recursed once per '[' (800 MB of
// stack for 1 MiB).
func TestDecodeInsert_HostileMemory(t *testing.T) {
	// Not parallel: it reads process-wide memory statistics.
	for _, body := range []string{
		strings.Repeat("[", 1<<20),
		`{"username": ` + strings.Repeat("[", 1<<20-13),
		strings.Repeat(`{"a":`, 1<<20/5),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan error)
		go func() { // a fresh stack, so that its growth shows in StackSys
			var b insertBody
			done <- decodeInsert([]byte(body), &b)
		}()
		if err := <-done; err == nil {
			t.Fatalf("%.20q…: accepted", body)
		}
		runtime.ReadMemStats(&after)
		heap := after.TotalAlloc - before.TotalAlloc
		stack := int64(after.StackSys) - int64(before.StackSys)
		t.Logf("%.10q…: %d bytes allocated, stack grew %d bytes", body, heap, stack)
		if heap > 20<<20 || stack > 20<<20 {
			t.Fatalf("%.20q…: %d bytes allocated, stack grew %d bytes; want under 20 MB each", body, heap, stack)
		}
	}
}

// BenchmarkDecodeInsert is the decoding of one insert body, checks
// included.
func BenchmarkDecodeInsert(b *testing.B) {
	body := []byte(`{"monitored_domain_id": 7, "tool_code": "scanner", "resource_url": "https://login.example.com/auth", "username": "user1@example.com", "password": "pw1", "hash": "0000000000000000000000000000000000000000000000000000000000000001", "hash_algorithm": "SHA-256"}`)
	b.ReportAllocs()
	for b.Loop() {
		var ib insertBody
		if err := decodeInsert(body, &ib); err != nil {
			b.Fatal(err)
		}
	}
}

// TestToError_BodyTimeout: a body cut by the body deadline is a 408.
func TestToError_BodyTimeout(t *testing.T) {
	t.Parallel()
	if e := toError(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)); e.Status != 408 || e.Code != "REQUEST_TIMEOUT" {
		t.Fatalf("got %d %s, want 408 REQUEST_TIMEOUT", e.Status, e.Code)
	}
}
