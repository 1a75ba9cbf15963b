package intake

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
			"bomb": mustParse(t, `{"id": "bomb", "token": "tok-0123456789abc",
			"collector_config": {"event_type": "e", "payload": {"host": "${host}", "all": "${@}"}}}`),
		}
		dir["bomb2"] = mustParse(t, `{"id": "bomb2", "token": "tok-0123456789abc",
		"collector_config": {"event_type": "e", "payload": {"v": "`+expr+`"}}}`)
		sink := &recorder{}
		in, err := New(Config{TenantID: "site-a", Source: "sat-1", RetryAfter: time.Second}, dir, sink, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		in.Register(mux)
		srv := serveFront(t, front, in, mux, ServerConfig{})

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
