package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestSignature_Verify(t *testing.T) {
	t.Parallel()
	const secret = "It's a Secret to Everybody"
	body := []byte("Hello, World!")
	// The example of GitHub's webhook documentation.
	const githubSig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sum := mac.Sum(nil)

	hexSig := &Signature{Header: "X-Hub-Signature-256", Prefix: "sha256=", Encoding: EncodingHex, secret: []byte(secret)}
	b64Sig := &Signature{Header: "X-Shopify-Hmac-Sha256", Encoding: EncodingBase64, secret: []byte(secret)}
	tests := []struct {
		name   string
		sig    *Signature
		body   []byte
		header string
		want   bool
	}{
		{"github example", hexSig, body, githubSig, true},
		{"upper-case hex and prefix", hexSig, body, strings.ToUpper(githubSig), true},
		{"surrounding space", hexSig, body, "  " + githubSig + "\t", true},
		{"other body", hexSig, []byte("Hello, World?"), githubSig, false},
		{"empty body", hexSig, nil, githubSig, false},
		{"no prefix", hexSig, body, strings.TrimPrefix(githubSig, "sha256="), false},
		{"wrong prefix", hexSig, body, "sha1=" + strings.TrimPrefix(githubSig, "sha256="), false},
		{"truncated digest", hexSig, body, githubSig[:len(githubSig)-2], false},
		{"odd-length digest", hexSig, body, githubSig[:len(githubSig)-1], false},
		{"not hex", hexSig, body, "sha256=" + strings.Repeat("zz", 32), false},
		{"empty header", hexSig, body, "", false},
		{"prefix only", hexSig, body, "sha256=", false},
		{"other secret", &Signature{Prefix: "sha256=", secret: []byte("other")}, body, githubSig, false},
		{"base64", b64Sig, body, base64.StdEncoding.EncodeToString(sum), true},
		{"base64 given hex", b64Sig, body, hex.EncodeToString(sum), false},
		{"base64 without padding", b64Sig, body, base64.RawStdEncoding.EncodeToString(sum), false},
		{"nil signature", nil, body, githubSig, false},
		{"no secret", &Signature{Prefix: "sha256="}, body, githubSig, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.sig.Verify(tt.body, tt.header); got != tt.want {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}

	// Sign produces what Verify accepts.
	for _, sig := range []*Signature{hexSig, b64Sig} {
		if h := sig.Sign(body); !sig.Verify(body, h) {
			t.Errorf("%s: Verify(Sign) = false", sig.Encoding)
		}
	}
	if got := hexSig.Sign(body); got != githubSig {
		t.Errorf("Sign = %s, want %s", got, githubSig)
	}
}

func TestSignature_Parse(t *testing.T) {
	t.Parallel()
	w := mustParse(t, `{"id": "h", "token": "t",
		"signature": {"header": "X-Shopify-Hmac-Sha256", "secret": "k", "encoding": "base64"},
		"collector_config": {"event_type": "e", "payload": {}}}`)
	s := w.Signature
	if s.Header != "X-Shopify-Hmac-Sha256" || s.Prefix != "" || s.Encoding != EncodingBase64 || string(s.secret) != "k" {
		t.Errorf("signature = %+v", *s)
	}
	if !s.Verify([]byte("{}"), s.Sign([]byte("{}"))) {
		t.Error("round trip failed")
	}
}
