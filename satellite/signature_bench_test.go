package satellite

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// signedHook is the webhook of BenchmarkIntake_Signed: Stripe's scheme
// with three secrets, of which the requests verify with the last (the
// worst case of a rotation).
const signedHook = `{"id": "signed", "token": "tok-0123456789abc",
	"signature": {"scheme": "stripe", "secrets": ["whsec_a", "whsec_b", "whsec_bench"]},
	"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}"}}}`

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// BenchmarkIntake_Signed runs, in alternating rounds of one run, the load of
// BenchmarkIntake against the same satellite on a webhook without
// signature and on one with a Stripe signature (three secrets, the last one
// verifying), and reports the signed calls' rate as a percentage of the
// plain ones'.
//
//	go test -run '^$' -bench BenchmarkIntake_Signed -benchtime 40000x ./satellite
func BenchmarkIntake_Signed(b *testing.B) {
	broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	cfg := testConfig(b, broker.Addr, writeHooks(b, map[string]string{"plain.json": plainHook, "signed.json": signedHook}), "")
	cfg.AckTimeout = DefaultAckTimeout
	s := start(b, cfg)
	signer := webhookstest.Parse(b, strings.Replace(signedHook, `["whsec_a", "whsec_b", "whsec_bench"]`, `["whsec_bench"]`, 1))
	plainClient, signedClient := newLoadClient(), newLoadClient()
	// Both through headerTransport, so that the load generator's own work
	// is the same. Signed once: the run must end within the 5-minute
	// tolerance.
	plainClient.Transport = headerTransport{base: plainClient.Transport, header: http.Header{}}
	signedClient.Transport = headerTransport{base: signedClient.Transport, header: signer.Signature.Sign(benchBody, time.Now(), "")}
	plainURL, signedURL := s.url+"/engine/webhook/event/plain?token=tok-0123456789abc", s.url+"/engine/webhook/event/signed?token=tok-0123456789abc"
	st := interleaved(b, loadTarget{plainClient, plainURL}, loadTarget{signedClient, signedURL})
	plain, signed := st[0], st[1]
	if plain.elapsed == 0 || signed.elapsed == 0 {
		return
	}
	reportRatio(b, "plain", &plain, "signed", &signed)
}
