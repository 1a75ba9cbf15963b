package intake

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// TestIntake_Signature runs the signature schemes, the replay window and the
// rotation of tokens and secrets through a real listener: each refusal has
// its status, code and reason, and reaches no sink.
func TestIntake_Signature(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		dir := testDirectory(t)
		// Entry 0 of tokens and secrets expired long ago; entry 1 is current.
		dir["stripe"] = webhookstest.Parse(t, `{"id": "stripe",
		"tokens": [{"value": "old-tok", "not_after": "2020-01-01T00:00:00Z"}, "tok"],
		"signature": {"scheme": "stripe", "tolerance": "2m",
			"secrets": [{"value": "whsec_old", "not_after": "2020-01-01T00:00:00Z"}, "whsec_new"]},
		"collector_config": {"event_type": "${type}", "payload": {}}}`)
		dir["std"] = webhookstest.Parse(t, `{"id": "std", "token": "tok",
		"signature": {"scheme": "standard-webhooks", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		"collector_config": {"event_type": "e", "payload": {}}}`)
		oldKey := webhookstest.Parse(t, `{"id": "stripe", "token": "t", "signature": {"scheme": "stripe", "secret": "whsec_old"},
		"collector_config": {"event_type": "e", "payload": {}}}`).Signature
		sink := &recorder{}
		in, srv := serveIntake(t, front, Config{Source: "sat-1"}, dir, sink)

		body := `{"type": "charge.succeeded"}`
		stripe, std := dir["stripe"].Signature, dir["std"].Signature
		now := time.Now()
		with := func(h http.Header, name, value string) http.Header {
			h = h.Clone()
			h.Set(name, value)
			return h
		}
		tests := []struct {
			name, id, token string
			header          http.Header
			status          int
			code            string
			reason          string // of squall_intake_refused_total
		}{
			{"stripe current secret and token", "stripe", "tok", stripe.Sign([]byte(body), now, ""), 200, "", ""},
			{"expired token", "stripe", "old-tok", stripe.Sign([]byte(body), now, ""), 401, CodeUnauthorized, ReasonToken},
			{"expired secret", "stripe", "tok", oldKey.Sign([]byte(body), now, ""), 401, CodeBadSignature, ReasonSignature},
			{"replayed 10 minutes later", "stripe", "tok", stripe.Sign([]byte(body), now.Add(-10*time.Minute), ""), 401, CodeSignatureTimestamp, ReasonTimestamp},
			{"timestamp 10 minutes ahead", "stripe", "tok", stripe.Sign([]byte(body), now.Add(10*time.Minute), ""), 401, CodeSignatureTimestamp, ReasonTimestamp},
			{"no signature", "stripe", "tok", nil, 401, CodeBadSignature, ReasonSignature},
			{"malformed", "stripe", "tok", http.Header{"Stripe-Signature": {"v1=nothex,t=1"}}, 400, CodeBadSignatureHeader, ReasonSignature},
			{"timestamp not numeric", "stripe", "tok", http.Header{"Stripe-Signature": {"t=yesterday,v1=00"}}, 400, CodeBadSignatureHeader, ReasonSignature},
			{"oversized", "stripe", "tok", http.Header{"Stripe-Signature": {"t=1," + strings.Repeat("v1=00,", 1000)}}, 400, CodeBadSignatureHeader, ReasonSignature},
			{"standard webhooks", "std", "tok", std.Sign([]byte(body), now, "msg_1"), 200, "", ""},
			{"standard webhooks id not signed", "std", "tok", with(std.Sign([]byte(body), now, "msg_1"), "Webhook-Id", "msg_2"), 401, CodeBadSignature, ReasonSignature},
			{"standard webhooks timestamp not numeric", "std", "tok", with(std.Sign([]byte(body), now, "msg_1"), "Webhook-Timestamp", "1e9"), 400, CodeBadSignatureHeader, ReasonSignature},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var before float64
				if tc.reason != "" {
					before = testutil.ToFloat64(in.m.refused.WithLabelValues(tc.id, tc.reason))
				}
				records := len(sink.records)
				a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/"+tc.id+"?token="+tc.token, strings.NewReader(body), tc.header)
				if a.status != tc.status || a.body.Code != tc.code {
					t.Fatalf("got %d %s, want %d %s", a.status, a.raw, tc.status, tc.code)
				}
				if tc.status == 200 {
					if len(sink.records) != records+1 {
						t.Errorf("accepted but %d records", len(sink.records)-records)
					}
					return
				}
				if len(sink.records) != records {
					t.Error("a refused call reached the sink")
				}
				if got := testutil.ToFloat64(in.m.refused.WithLabelValues(tc.id, tc.reason)); got != before+1 {
					t.Errorf("refused{%s,%s} went from %v to %v", tc.id, tc.reason, before, got)
				}
				if tc.code == CodeSignatureTimestamp && a.body.Params["tolerance"] != "2m0s" {
					t.Errorf("params %v", a.body.Params)
				}
				if tc.code != CodeUnauthorized && a.body.Params["header"] == nil {
					t.Errorf("params %v name no header", a.body.Params)
				}
			})
		}
		// The current entries (index 1) verified the accepted stripe call, and
		// no metric names an entry that verified nothing.
		for _, c := range []struct {
			webhook, credential, index string
			want                       float64
		}{
			{"stripe", "token", "1", 8}, {"stripe", "token", "0", 0},
			{"stripe", "secret", "1", 1}, {"stripe", "secret", "0", 0},
			{"std", "secret", "0", 1},
		} {
			if got := testutil.ToFloat64(in.m.credentials.WithLabelValues(c.webhook, c.credential, c.index)); got != c.want {
				t.Errorf("credential_verified{%s,%s,%s} = %v, want %v", c.webhook, c.credential, c.index, got, c.want)
			}
		}
	})
}
