package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
)

// Encodings of a [Signature] digest in its header.
const (
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// Signature verifies an HMAC-SHA256 of the raw request body sent in a header,
// as GitHub (X-Hub-Signature-256: sha256=<hex>) and many other producers do.
// In a webhook file it is the optional "signature" object:
//
//	"signature": {"header": "X-Hub-Signature-256", "secret": "…", "prefix": "sha256=", "encoding": "hex"}
//
// header and secret are required; prefix is optional (compared ignoring
// letter case); encoding is "hex" (the default) or "base64" (standard
// alphabet with padding). The secret is kept unexported and never printed.
type Signature struct {
	// Header is the name of the request header that carries the digest.
	Header string
	// Prefix must precede the digest in the header value, such as "sha256=".
	Prefix string
	// Encoding is EncodingHex or EncodingBase64.
	Encoding string

	secret []byte
}

// Verify reports whether headerValue carries the HMAC-SHA256 of body keyed
// with the configured secret. Surrounding white space is ignored. The digests
// are compared in constant time. A nil Signature verifies nothing and
// returns false.
func (s *Signature) Verify(body []byte, headerValue string) bool {
	if s == nil || len(s.secret) == 0 {
		return false
	}
	v := strings.TrimSpace(headerValue)
	if len(v) < len(s.Prefix) || !strings.EqualFold(v[:len(s.Prefix)], s.Prefix) {
		return false
	}
	v = v[len(s.Prefix):]
	var got []byte
	var err error
	switch s.Encoding {
	case EncodingBase64:
		got, err = base64.StdEncoding.DecodeString(v)
	default:
		got, err = hex.DecodeString(v)
	}
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign returns the header value that Verify accepts for body: the prefix
// followed by the encoded HMAC-SHA256. It is meant for tests and clients.
func (s *Signature) Sign(body []byte) string {
	mac := hmac.New(sha256.New, s.secret)
	mac.Write(body)
	sum := mac.Sum(nil)
	if s.Encoding == EncodingBase64 {
		return s.Prefix + base64.StdEncoding.EncodeToString(sum)
	}
	return s.Prefix + hex.EncodeToString(sum)
}

// String describes the signature check without its secret.
func (s Signature) String() string {
	return fmt.Sprintf("hmac-sha256 header=%s prefix=%q encoding=%s secret=[redacted]", s.Header, s.Prefix, s.Encoding)
}

// Format implements fmt.Formatter so that no verb, not even %#v or %d,
// prints the secret.
func (s Signature) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// LogValue implements slog.LogValuer without the secret.
func (s Signature) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("header", s.Header),
		slog.String("prefix", s.Prefix),
		slog.String("encoding", s.Encoding),
	)
}
