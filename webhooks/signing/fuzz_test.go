package signing

import (
	"net/http"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary header values to the parsers of every scheme.
// Verify must not panic, must answer within its contract (an index of a key
// or an *Error), and must accept only what the key signed.
func FuzzVerify(f *testing.F) {
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "1614265330", "msg_1", []byte("Hello, World!"))
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,AAAA", "1614265330", "msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{"test": 2432232314}`))
	f.Add("t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffb", "", "", []byte("{}"))
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "1531420618", "", []byte("token=x"))
	f.Add("t=,v1=,=,,", "-1", "", []byte{})
	f.Add("sha512=AAAA====", "99999999999999999999", " ", []byte("\x00"))
	now := time.Unix(1614265330, 0)
	var verifiers []*Verifier
	for _, cfg := range []Config{
		{Scheme: SchemeGitHub},
		{Scheme: SchemeStandardWebhooks},
		{Scheme: SchemeStripe},
		{Scheme: SchemeSlack},
		{Scheme: SchemeHMAC, Header: "X-Sig", Prefix: "sha512=", Encoding: EncodingBase64, Algorithm: AlgorithmSHA512, TimestampHeader: "X-Ts"},
	} {
		v, err := New(cfg, []Key{{Secret: []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}})
		if err != nil {
			f.Fatal(err)
		}
		verifiers = append(verifiers, v)
	}
	f.Fuzz(func(t *testing.T, sig, ts, id string, body []byte) {
		for _, v := range verifiers {
			h := http.Header{}
			for _, name := range []string{v.Header(), "X-Slack-Request-Timestamp", "Webhook-Timestamp", "X-Ts", "Webhook-Id"} {
				switch name {
				case v.Header():
					h.Set(name, sig)
				case "Webhook-Id":
					h.Set(name, id)
				default:
					h.Set(name, ts)
				}
			}
			index, err := v.Verify(h, body, now)
			switch {
			case err == nil && index != 0:
				t.Fatalf("%s: index %d without error", v.Scheme(), index)
			case err != nil && index != -1:
				t.Fatalf("%s: index %d with error %v", v.Scheme(), index, err)
			}
			if err == nil {
				// Only a signature the key made verifies: re-signing
				// this message gives a header that verifies too.
				if _, err := v.Verify(v.Sign(body, now, id), body, now); err != nil && id != "" {
					t.Fatalf("%s: accepted %q but its own signature fails: %v", v.Scheme(), sig, err)
				}
			}
		}
	})
}
