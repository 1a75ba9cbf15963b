package intake

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// discard is a Sink that drops every record.
type discard struct{}

func (discard) Publish(context.Context, Record) error { return nil }

// benchSignedBody is a 106-byte JSON body, as in the satellite's
// BenchmarkIntake.
var benchSignedBody = []byte(`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`)

// signedCall is one prepared call of the signature benchmarks.
type signedCall struct {
	name string
	req  *http.Request
	body *bytes.Reader
}

// serve answers the call once on in and fails b unless it is accepted.
func (c *signedCall) serve(b *testing.B, in *Intake) {
	c.body.Reset(benchSignedBody)
	c.req.Body = io.NopCloser(c.body)
	w := httptest.NewRecorder()
	in.ServeHTTP(w, c.req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
	}
}

// BenchmarkIntake_Signature measures the intake handler in process (no
// network, a sink that drops the records) on a webhook without signature
// and with each scheme, three secrets of which the last verifies. "ratio"
// alternates rounds of the plain and the Stripe webhook in one run and
// reports the signed calls' rate as a percentage of the plain ones'.
//
//	go test -run '^$' -bench BenchmarkIntake_Signature ./satellite/intake
func BenchmarkIntake_Signature(b *testing.B) {
	dir := directory{}
	const collector = `"collector_config": {"event_type": "e", "payload": {"all": "${@}"}}`
	for id, sig := range map[string]string{
		"plain":             ``,
		"github":            `"signature": {"scheme": "github", "secrets": ["a", "b", "s3cr3t"]},`,
		"standard-webhooks": `"signature": {"scheme": "standard-webhooks", "secrets": ["whsec_YQ==", "whsec_Yg==", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]},`,
		"stripe":            `"signature": {"scheme": "stripe", "secrets": ["a", "b", "whsec_s3cr3t"]},`,
		"slack":             `"signature": {"scheme": "slack", "secrets": ["a", "b", "s3cr3t"]},`,
		"hmac-sha512":       `"signature": {"scheme": "hmac", "header": "X-Sig", "algorithm": "sha512", "timestamp_header": "X-Ts", "secrets": ["a", "b", "s3cr3t"]},`,
	} {
		dir[id] = webhookstest.Parse(b, `{"id": "`+id+`", "token": "tok-0123456789abc", `+sig+collector+`}`)
	}
	in, err := New(Config{Source: "bench"}, dir, discard{}, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	call := func(id string) *signedCall {
		r := httptest.NewRequest(http.MethodPost, "/engine/webhook/event/"+id+"?token=tok-0123456789abc", nil)
		r.SetPathValue("id", id)
		if v := dir[id].Signature; v != nil {
			// Signed with the last secret only, as after a rotation.
			last := webhookstest.Parse(b, `{"id": "x", "token": "t", "signature": `+map[string]string{
				"github":            `{"scheme": "github", "secret": "s3cr3t"}`,
				"standard-webhooks": `{"scheme": "standard-webhooks", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`,
				"stripe":            `{"scheme": "stripe", "secret": "whsec_s3cr3t"}`,
				"slack":             `{"scheme": "slack", "secret": "s3cr3t"}`,
				"hmac-sha512":       `{"scheme": "hmac", "header": "X-Sig", "algorithm": "sha512", "timestamp_header": "X-Ts", "secret": "s3cr3t"}`,
			}[id]+`, `+collector+`}`).Signature
			for k, vs := range last.Sign(benchSignedBody, now, "msg_1") {
				r.Header[k] = vs
			}
		}
		return &signedCall{name: id, req: r, body: bytes.NewReader(nil)}
	}
	for _, id := range []string{"plain", "github", "standard-webhooks", "stripe", "slack", "hmac-sha512"} {
		c := call(id)
		b.Run(id, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.serve(b, in)
			}
		})
	}
	b.Run("ratio", func(b *testing.B) {
		plain, signed := call("plain"), call("stripe")
		const rounds = 10
		var plainTime, signedTime time.Duration
		b.ReportAllocs()
		for i := range rounds {
			n := b.N / rounds
			if i < b.N%rounds {
				n++
			}
			for _, c := range []struct {
				call *signedCall
				d    *time.Duration
			}{{plain, &plainTime}, {signed, &signedTime}} {
				start := time.Now()
				for range n {
					c.call.serve(b, in)
				}
				*c.d += time.Since(start)
			}
		}
		if plainTime > 0 && signedTime > 0 {
			b.ReportMetric(100*float64(plainTime)/float64(signedTime), "signed-rate-%")
		}
	})
}
