package api

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/master"
)

// TestIdempotencyKey_Answers: writes retried with the same Idempotency-Key,
// through other masters, get the first attempt's answer from the record
// (Idempotent-Replayed), although running them again would fail: the
// draft created is the first one, a second add of a node is not a
// conflict, a second delete is not "no such draft". The same key with
// another body is a 422.
func TestIdempotencyKey_Answers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	do := func(node int, method, path, key, body string) response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, e.cluster.URL(node)+path, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(master.HeaderIdempotencyKey, key)
		resp, b := calltest.Do(t, calltest.Client().Do, req)
		return response{resp.StatusCode, b, resp.Header}
	}
	twice := func(method, path, key, body string) response {
		t.Helper()
		first := do(0, method, path, key, body)
		e.expect(first, 200, "")
		if first.header.Get(master.HeaderIdempotentReplayed) != "" {
			t.Fatalf("%s %s: the first attempt replayed", method, path)
		}
		for node := 1; node < 3; node++ {
			again := do(node, method, path, key, body)
			e.expect(again, 200, "")
			if !bytes.Equal(again.body, first.body) || again.header.Get(master.HeaderIdempotentReplayed) != "true" {
				t.Fatalf("%s %s again through node %d: %s (replayed %q), want %s from the record", method, path, node,
					again.body, again.header.Get(master.HeaderIdempotentReplayed), first.body)
			}
		}
		return first
	}

	created := twice("POST", cfgPath+"/drafts/m", "create-1", "")
	id, _ := created.json(t)["id"].(string)
	if d, err := e.cluster.Server(0).Store().Draft(); err != nil || d.ID != id {
		t.Fatalf("draft %+v %v, want the first attempt's %s", d, err, id)
	}
	twice("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", "add-small", `{"type":"Ruleset","name":"small"}`)
	e.expect(do(0, "POST", cfgPath+"/draft/tree/details/m/"+id+"/master", "add-small", `{"type":"Ruleset","name":"other"}`),
		http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
	// Without the key, the same add is a new request: a conflict.
	if r := e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, `{"type":"Ruleset","name":"small"}`); r.status == 200 {
		t.Fatalf("a second add without the key: %d %s", r.status, r.body)
	}
	twice("DELETE", cfgPath+"/drafts/m/"+id, "delete-1", "")
}
