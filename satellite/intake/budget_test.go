package intake

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// TestIntake_OutputBudget: a webhook whose expression doubles its input
// forty times (@ | [@, @] | ...) describes terabytes from a small body: the
// intake answers 422 TEMPLATE_ERROR naming the output budget, before the
// expression runs, and publishes nothing; the same webhook's ordinary
// fields still pass.
func TestIntake_OutputBudget(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		expr := "${to_string(@" + strings.Repeat(" | [@, @]", 40) + ")}"
		dir := directory{
			"bomb": webhookstest.Parse(t, `{"id": "bomb", "token": "tok-0123456789abc",
			"collector_config": {"event_type": "e", "payload": {"host": "${host}", "all": "${@}"}}}`),
		}
		dir["bomb2"] = webhookstest.Parse(t, `{"id": "bomb2", "token": "tok-0123456789abc",
		"collector_config": {"event_type": "e", "payload": {"v": "`+expr+`"}}}`)
		sink := &recorder{}
		_, srv := serveIntake(t, front, Config{TenantID: "site-a", Source: "sat-1", RetryAfter: time.Second}, dir, sink)

		body := `{"host": "web-1", "message": "` + strings.Repeat("x", 1400) + `"}`
		a := call(t, srv.Client(), http.MethodPost, srv.URL+"/engine/webhook/event/bomb2?token=tok-0123456789abc", strings.NewReader(body),
			http.Header{"Content-Type": {"application/json"}})
		if a.status != http.StatusUnprocessableEntity || a.body.Code != CodeTemplate || a.body.Params["field"] != "collector_config.payload.v" ||
			!strings.Contains(a.body.Message, "output budget exceeded") || !strings.Contains(a.body.Message, strconv.Itoa(len(body))+"-byte body") {
			t.Fatalf("crafted expression: %d %s", a.status, a.raw)
		}
		sink.mu.Lock()
		n := len(sink.records)
		sink.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d records published for a refused call", n)
		}
		if a := call(t, srv.Client(), http.MethodPost, srv.URL+"/engine/webhook/event/bomb?token=tok-0123456789abc", strings.NewReader(body),
			http.Header{"Content-Type": {"application/json"}}); a.status != http.StatusOK {
			t.Fatalf("ordinary expressions: %d %s", a.status, a.raw)
		}
	})
}

// TestIntake_EventDepth: the intake refuses with 400, before any event
// exists, a body whose event would nest deeper than the engines evaluate
// (jsonlimit.MaxEventDepth), on both the direct and the decoding path of
// the collector; an event at the limit is accepted.
func TestIntake_EventDepth(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		dir := directory{
			// ${@} alone: the direct path (bodies up to 16 deep), then
			// the decoding path.
			"whole": webhookstest.Parse(t, `{"id": "whole", "token": "tok-0123456789abc", "max_payload_size": "1MiB",
				"collector_config": {"event_type": "e", "payload": {"all": "${@}"}}}`),
			"picked": webhookstest.Parse(t, `{"id": "picked", "token": "tok-0123456789abc", "max_payload_size": "1MiB",
				"collector_config": {"event_type": "e", "payload": {"a": "${a}"}}}`),
		}
		sink := &recorder{}
		_, srv := serveIntake(t, front, Config{Source: "sat-1"}, dir, sink)
		nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
		post := func(id, body string) answer {
			return call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/"+id+"?token=tok-0123456789abc", strings.NewReader(body), nil)
		}
		// The event object is level 1, the payload 2, "all" holds the body
		// from level 3: a body MaxEventDepth-2 deep makes an event at the
		// limit.
		limit := jsonlimit.MaxEventDepth
		for _, tc := range []struct {
			name, id, body string
			ok             bool
		}{
			{"at the limit", "whole", nested(limit - 2), true},
			{"one level over", "whole", nested(limit - 1), false},
			{"9,990 deep", "whole", nested(9990), false},
			{"deep object", "whole", strings.Repeat(`{"a":`, limit) + "1" + strings.Repeat("}", limit), false},
			{"a deep part picked", "picked", `{"a": ` + nested(limit) + `}`, false},
			{"a shallow part picked from a deep body", "picked", `{"a": 1, "b": ` + nested(2000) + `}`, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				records := len(sink.records)
				a := post(tc.id, tc.body)
				if tc.ok {
					eventID(t, a)
					if v := sink.last(t).Value; jsonlimit.Check(v, jsonlimit.Limits{MaxDepth: limit}) != nil {
						t.Errorf("an accepted event nests deeper than %d", limit)
					}
					return
				}
				if a.status != http.StatusBadRequest || a.body.Code != CodeEventTooDeep || a.body.Params["max_depth"] != float64(limit) {
					t.Fatalf("%d %s, want 400 %s", a.status, a.raw, CodeEventTooDeep)
				}
				if len(sink.records) != records {
					t.Error("a refused body made an event")
				}
			})
		}
	})
}
