package findings_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestAPI_HostileBodies: hostile 1 MiB bodies with a valid token, through
// the real HTTP server: each is a 400 naming the problem, and costs the
// process under 20 MB (heap allocated while it was served, stack growth),
// for PUT (insert) and PATCH alike.
func TestAPI_HostileBodies(t *testing.T) {
	e := newEnv(t)
	leader := e.c.Leader()
	uid := e.insert(t, leader, e.tokA, 1, http.StatusCreated)
	const mib = 1 << 20
	tests := []struct {
		name, method, path, body, code string
	}{
		{"array flood", "PUT", "/findings/credentials", strings.Repeat("[", mib), "BAD_REQUEST"},
		{"object flood", "PUT", "/findings/credentials", `{"username": ` + strings.Repeat(`{"a":`, mib/5-3), "BAD_REQUEST"},
		{"balanced", "PUT", "/findings/credentials", `{"username": ` + strings.Repeat("[", mib/2-8) + strings.Repeat("]", mib/2-8) + `}`, "BAD_REQUEST"},
		{"patch flood", "PATCH", "/finding/" + uid, `{"ticket": ` + strings.Repeat("[", mib-12), "BAD_REQUEST"},
		{"invalid UTF-8", "PUT", "/findings/credentials", "{\"monitored_domain_id\": 1, \"tool_code\": \"t\", \"resource_url\": \"https://example.com/\", \"username\": \"\xff\", \"password\": \"p\"}", "BAD_REQUEST"},
		{"duplicate key", "PUT", "/findings/credentials", `{"monitored_domain_id": 1, "monitored_domain_id": 2, "tool_code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`, "DUPLICATE_FIELD"},
		{"case-folded key", "PUT", "/findings/credentials", `{"Monitored_Domain_ID": 1, "tool_code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`, "UNKNOWN_FIELD"},
		{"duplicate patch key", "PATCH", "/finding/" + uid, `{"state": "Resolved", "state": "Ignored"}`, "DUPLICATE_FIELD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := e.do(t, leader, tc.method, tc.path, e.tokA, "", tc.body)
			runtime.ReadMemStats(&after)
			if code, _ := r.errCode(t); r.status != http.StatusBadRequest || code != tc.code {
				t.Fatalf("status %d code %s, want 400 %s: %.300s", r.status, code, tc.code, r.body)
			}
			heap := after.TotalAlloc - before.TotalAlloc
			stack := int64(after.StackSys) - int64(before.StackSys)
			t.Logf("%d bytes allocated, stack grew %d bytes", heap, stack)
			// The body is read (1 MiB) and sent (1 MiB) in this process.
			if heap > 20<<20 || stack > 20<<20 {
				t.Fatalf("%d bytes allocated, stack grew %d bytes; want under 20 MB each", heap, stack)
			}
		})
	}
	// Nothing changed: the finding is as inserted.
	if r := e.do(t, leader, "GET", "/finding/"+uid, e.tokA, "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"Unassigned"`) {
		t.Fatalf("finding after the refused patches: %d %s", r.status, r.body)
	}
}
