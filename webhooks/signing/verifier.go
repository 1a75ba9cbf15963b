package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/internal/httpguard"
)

// Schemes.
const (
	SchemeGitHub           = "github"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeStripe           = "stripe"
	SchemeSlack            = "slack"
	SchemeHMAC             = "hmac"
)

// Schemes lists the schemes in the order the documentation gives them.
var Schemes = []string{SchemeGitHub, SchemeStandardWebhooks, SchemeStripe, SchemeSlack, SchemeHMAC}

// Encodings of a digest in the generic hmac scheme.
const (
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// Algorithms of the generic hmac scheme.
const (
	AlgorithmSHA256 = "sha256"
	AlgorithmSHA512 = "sha512"
)

// Placeholders of the signed-content template of the generic hmac scheme.
const (
	PlaceholderBody      = "{body}"
	PlaceholderTimestamp = "{timestamp}"
)

// Limits.
const (
	// DefaultTolerance is the default replay window of timestamped
	// schemes, in either direction.
	DefaultTolerance = 5 * time.Minute
	// MaxTolerance bounds the configurable tolerance.
	MaxTolerance = 7 * 24 * time.Hour
	// MaxHeaderLen bounds the value of each header a scheme reads
	// (signature, timestamp, message id); longer values are malformed.
	MaxHeaderLen = 4096
	// MaxSignatures bounds the signatures one request may carry.
	MaxSignatures = 16
	// MaxKeys bounds the keys of a Verifier.
	MaxKeys = 16
	// MaxContentLen bounds the signed-content template.
	MaxContentLen = 256
)

// Header names of the fixed schemes.
const (
	HeaderGitHub                = "X-Hub-Signature-256"
	HeaderWebhookID             = "Webhook-Id"
	HeaderWebhookTimestamp      = "Webhook-Timestamp"
	HeaderWebhookSignature      = "Webhook-Signature"
	HeaderSvixID                = "Svix-Id"
	HeaderSvixTimestamp         = "Svix-Timestamp"
	HeaderSvixSignature         = "Svix-Signature"
	HeaderStripe                = "Stripe-Signature"
	HeaderSlackSignature        = "X-Slack-Signature"
	HeaderSlackRequestTimestamp = "X-Slack-Request-Timestamp"
)

// standardSecretPrefix starts a Standard Webhooks secret.
const standardSecretPrefix = "whsec_"

// Errors of [Verifier.Verify], wrapped in an [*Error]. Match them with
// [errors.Is].
var (
	// ErrMissing: a header the scheme needs is absent or empty.
	ErrMissing = errors.New("missing")
	// ErrMalformed: a header is too long, or its value cannot be parsed
	// (not hex or base64, a non-numeric timestamp, too many signatures).
	ErrMalformed = errors.New("malformed")
	// ErrMismatch: no valid key verifies any of the signatures.
	ErrMismatch = errors.New("no signature matches")
	// ErrTimestamp: the signature matches but its timestamp is further
	// than the tolerance from now (a replay, or a clock far off).
	ErrTimestamp = errors.New("timestamp outside the tolerance")
	// ErrAmbiguous: a Standard Webhooks request carries both the webhook-*
	// and the svix-* message id, with different values, so which message
	// it is depends on which one a reader takes.
	ErrAmbiguous = errors.New("two different message ids")
)

// Error is a refused request: the header at fault and the reason.
type Error struct {
	// Header names the header at fault.
	Header string
	// Err is ErrMissing, ErrMalformed, ErrMismatch, ErrTimestamp or
	// ErrAmbiguous.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return "signature header " + e.Header + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// Key is one signing secret.
type Key struct {
	// Secret is the secret as configured. For standard-webhooks it is
	// "whsec_<base64>" (the prefix is optional) and the key is the
	// decoded bytes; for the other schemes it is the key itself.
	Secret []byte
	// NotAfter, when not zero, is the last instant the key verifies.
	NotAfter time.Time
}

// valid reports whether k may verify at now.
func (k *Key) valid(now time.Time) bool { return k.NotAfter.IsZero() || !now.After(k.NotAfter) }

// Config chooses a scheme and its options.
type Config struct {
	// Scheme is one of [Schemes].
	Scheme string
	// Tolerance is the replay window of timestamped schemes (default
	// DefaultTolerance); it must be zero for the others.
	Tolerance time.Duration

	// The options of the generic hmac scheme; they must be empty for the
	// others.

	// Header carries the digest (required).
	Header string
	// Prefix precedes the digest, such as "sha256=" (compared ignoring
	// letter case).
	Prefix string
	// Encoding is EncodingHex (default) or EncodingBase64.
	Encoding string
	// Algorithm is AlgorithmSHA256 (default) or AlgorithmSHA512.
	Algorithm string
	// TimestampHeader, when set, carries the request's Unix time in
	// seconds, checked against the tolerance.
	TimestampHeader string
	// Content is the template of the signed content: PlaceholderBody
	// exactly once, PlaceholderTimestamp when TimestampHeader is set, and
	// literal text. The default is "{body}", or "{timestamp}.{body}" with
	// a timestamp header.
	Content string
}

// Verifier checks the signature of requests of one webhook. Build it with
// [New]; it is safe for concurrent use.
type Verifier struct {
	scheme    string
	tolerance time.Duration
	header    string // the signature header
	tsHeader  string // the timestamp header, "" when the scheme has none
	prefix    string
	encoding  string
	algorithm string
	content   []string // literal text and placeholders, in order
	newHash   func() hash.Hash
	keys      []Key
	// macs[i] holds HMACs keyed with keys[i], reused across calls: a
	// keyed HMAC costs two hash states and the key schedule to build.
	macs []sync.Pool
}

// New builds the verifier of cfg with keys (at least one, at most
// MaxKeys). Errors name the offending option and never contain a key.
func New(cfg Config, keys []Key) (*Verifier, error) {
	v := &Verifier{scheme: cfg.Scheme, tolerance: cfg.Tolerance, newHash: sha256.New, algorithm: AlgorithmSHA256, encoding: EncodingHex}
	var errs []error
	if cfg.Scheme != SchemeHMAC {
		for _, o := range []struct{ name, value string }{
			{"header", cfg.Header}, {"prefix", cfg.Prefix}, {"encoding", cfg.Encoding}, {"algorithm", cfg.Algorithm},
			{"timestamp_header", cfg.TimestampHeader}, {"content", cfg.Content},
		} {
			if o.value != "" {
				errs = append(errs, &OptionError{Option: o.name, Value: o.value, Err: fmt.Errorf("only for the %s scheme", SchemeHMAC)})
			}
		}
	}
	switch cfg.Scheme {
	case SchemeGitHub:
		v.header, v.prefix, v.content = HeaderGitHub, "sha256=", []string{PlaceholderBody}
	case SchemeStandardWebhooks:
		v.header, v.tsHeader, v.encoding = HeaderWebhookSignature, HeaderWebhookTimestamp, EncodingBase64
	case SchemeStripe:
		v.header, v.tsHeader = HeaderStripe, HeaderStripe
	case SchemeSlack:
		v.header, v.tsHeader, v.prefix = HeaderSlackSignature, HeaderSlackRequestTimestamp, "v0="
	case SchemeHMAC:
		errs = append(errs, v.configureHMAC(cfg)...)
	default:
		errs = append(errs, &OptionError{Option: "scheme", Value: cfg.Scheme,
			Err: fmt.Errorf("unknown scheme (known: %s)", strings.Join(Schemes, ", "))})
	}
	switch {
	case cfg.Tolerance < 0 || cfg.Tolerance > MaxTolerance:
		errs = append(errs, &OptionError{Option: "tolerance", Value: cfg.Tolerance.String(),
			Err: fmt.Errorf("must be between 0 and %s", MaxTolerance)})
	case cfg.Tolerance != 0 && v.tsHeader == "" && errors.Join(errs...) == nil:
		errs = append(errs, &OptionError{Option: "tolerance", Value: cfg.Tolerance.String(),
			Err: errors.New("only for schemes with a timestamp")})
	case cfg.Tolerance == 0:
		v.tolerance = DefaultTolerance
	}
	if v.tsHeader == "" {
		v.tolerance = 0
	}

	switch {
	case len(keys) == 0:
		errs = append(errs, &OptionError{Option: "secrets", Err: errors.New("at least one secret is required")})
	case len(keys) > MaxKeys:
		errs = append(errs, &OptionError{Option: "secrets", Err: fmt.Errorf("at most %d secrets", MaxKeys)})
	}
	for i, k := range keys {
		secret, err := v.decodeSecret(k.Secret)
		if err != nil {
			errs = append(errs, &OptionError{Option: "secrets[" + strconv.Itoa(i) + "]", Err: err})
			continue
		}
		v.keys = append(v.keys, Key{Secret: secret, NotAfter: k.NotAfter})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v.macs = make([]sync.Pool, len(v.keys))
	for i := range v.keys {
		key, newHash := v.keys[i].Secret, v.newHash
		v.macs[i].New = func() any { return &keyedMAC{h: hmac.New(newHash, key)} }
	}
	return v, nil
}

// configureHMAC applies the options of the generic hmac scheme.
func (v *Verifier) configureHMAC(cfg Config) []error {
	var errs []error
	v.header, v.prefix, v.tsHeader = cfg.Header, cfg.Prefix, cfg.TimestampHeader
	if cfg.Header == "" {
		errs = append(errs, &OptionError{Option: "header", Err: errors.New("required")})
	} else if !httpguard.ValidFieldName(cfg.Header) {
		errs = append(errs, &OptionError{Option: "header", Value: cfg.Header, Err: errors.New("must be an HTTP header name")})
	}
	if cfg.TimestampHeader != "" && !httpguard.ValidFieldName(cfg.TimestampHeader) {
		errs = append(errs, &OptionError{Option: "timestamp_header", Value: cfg.TimestampHeader, Err: errors.New("must be an HTTP header name")})
	}
	if len(cfg.Prefix) > 64 {
		errs = append(errs, &OptionError{Option: "prefix", Value: cfg.Prefix, Err: errors.New("longer than 64 bytes")})
	}
	switch cfg.Encoding {
	case "", EncodingHex:
	case EncodingBase64:
		v.encoding = EncodingBase64
	default:
		errs = append(errs, &OptionError{Option: "encoding", Value: cfg.Encoding, Err: errors.New(`must be "hex" or "base64"`)})
	}
	switch cfg.Algorithm {
	case "", AlgorithmSHA256:
	case AlgorithmSHA512:
		v.algorithm, v.newHash = AlgorithmSHA512, sha512.New
	default:
		errs = append(errs, &OptionError{Option: "algorithm", Value: cfg.Algorithm, Err: errors.New(`must be "sha256" or "sha512"`)})
	}
	content := cfg.Content
	if content == "" {
		content = PlaceholderBody
		if cfg.TimestampHeader != "" {
			content = PlaceholderTimestamp + "." + PlaceholderBody
		}
	}
	parts, err := parseContent(content, cfg.TimestampHeader != "")
	if err != nil {
		errs = append(errs, &OptionError{Option: "content", Value: content, Err: err})
	}
	v.content = parts
	return errs
}

// parseContent splits a signed-content template into literal text and
// placeholders.
func parseContent(s string, timestamp bool) ([]string, error) {
	if len(s) > MaxContentLen {
		return nil, fmt.Errorf("longer than %d bytes", MaxContentLen)
	}
	var parts []string
	bodies, stamps := 0, 0
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			if strings.IndexByte(s, '}') >= 0 {
				return nil, errors.New(`"}" outside a placeholder`)
			}
			parts = append(parts, s)
			break
		}
		if i > 0 {
			if strings.IndexByte(s[:i], '}') >= 0 {
				return nil, errors.New(`"}" outside a placeholder`)
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
		switch {
		case strings.HasPrefix(s, PlaceholderBody):
			bodies++
			parts = append(parts, PlaceholderBody)
			s = s[len(PlaceholderBody):]
		case strings.HasPrefix(s, PlaceholderTimestamp):
			stamps++
			parts = append(parts, PlaceholderTimestamp)
			s = s[len(PlaceholderTimestamp):]
		default:
			return nil, fmt.Errorf("unknown placeholder (known: %s, %s)", PlaceholderBody, PlaceholderTimestamp)
		}
	}
	switch {
	case bodies != 1:
		return nil, fmt.Errorf("must contain %s exactly once", PlaceholderBody)
	case timestamp && stamps == 0:
		return nil, fmt.Errorf("must contain %s: the timestamp header is signed", PlaceholderTimestamp)
	case !timestamp && stamps > 0:
		return nil, fmt.Errorf("%s needs a timestamp_header", PlaceholderTimestamp)
	}
	return parts, nil
}

// decodeSecret turns a configured secret into the HMAC key.
func (v *Verifier) decodeSecret(secret []byte) ([]byte, error) {
	if len(secret) == 0 {
		return nil, errors.New("empty")
	}
	if v.scheme != SchemeStandardWebhooks {
		return secret, nil
	}
	s := strings.TrimPrefix(string(secret), standardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(key) == 0 {
		return nil, errors.New(`must be "whsec_" followed by base64`)
	}
	return key, nil
}

// Scheme returns the scheme.
func (v *Verifier) Scheme() string { return v.scheme }

// Header returns the name of the header that carries the signature.
func (v *Verifier) Header() string { return v.header }

// Tolerance returns the replay window, zero for schemes without timestamp.
func (v *Verifier) Tolerance() time.Duration { return v.tolerance }

// Keys returns the number of keys.
func (v *Verifier) Keys() int { return len(v.keys) }

// OptionError reports an invalid option of a [Config]. Option is the field
// name as written in a webhook file's "signature" object; Value is never a
// secret.
type OptionError struct {
	Option string
	Value  string
	Err    error
}

// Error implements error.
func (e *OptionError) Error() string {
	if e.Value != "" {
		return e.Option + " " + strconv.Quote(e.Value) + ": " + e.Err.Error()
	}
	return e.Option + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *OptionError) Unwrap() error { return e.Err }

// String describes the verifier without its keys.
func (v *Verifier) String() string {
	s := fmt.Sprintf("%s header=%s", v.scheme, v.header)
	if v.scheme == SchemeHMAC {
		s += fmt.Sprintf(" prefix=%q encoding=%s algorithm=%s content=%q", v.prefix, v.encoding, v.algorithm, strings.Join(v.content, ""))
		if v.tsHeader != "" {
			s += " timestamp_header=" + v.tsHeader
		}
	}
	if v.tolerance > 0 {
		s += " tolerance=" + v.tolerance.String()
	}
	return s + fmt.Sprintf(" secrets=%d [redacted]", len(v.keys))
}

// Format implements fmt.Formatter so that no verb prints a key.
func (v *Verifier) Format(f fmt.State, _ rune) { fmt.Fprint(f, v.String()) }

// LogValue implements slog.LogValuer without the keys.
func (v *Verifier) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("scheme", v.scheme), slog.String("header", v.header), slog.Int("secrets", len(v.keys))}
	if v.tolerance > 0 {
		attrs = append(attrs, slog.Duration("tolerance", v.tolerance))
	}
	return slog.GroupValue(attrs...)
}

// keyedMAC is an HMAC keyed with one key, and room for its sum.
type keyedMAC struct {
	h    hash.Hash
	sum  [maxDigest]byte // the last sum, Size() bytes
	text []byte          // scratch for the signed text around the body
}

// mac computes the HMAC of the signed content under key i into a keyedMAC
// from the key's pool, which the caller puts back when done with the sum.
func (v *Verifier) mac(i int, m *message, body []byte) *keyedMAC {
	km := v.macs[i].Get().(*keyedMAC)
	h := km.h
	h.Reset()
	// The text around the body goes through km.text: writing strings to
	// the hash directly would copy each to the heap.
	t := km.text[:0]
	switch v.scheme {
	case SchemeStandardWebhooks:
		t = append(append(append(append(t, m.id...), '.'), m.timestamp...), '.')
		h.Write(t)
		h.Write(body)
	case SchemeStripe:
		t = append(append(t, m.timestamp...), '.')
		h.Write(t)
		h.Write(body)
	case SchemeSlack:
		t = append(append(append(t, "v0:"...), m.timestamp...), ':')
		h.Write(t)
		h.Write(body)
	default:
		for _, p := range v.content {
			switch p {
			case PlaceholderBody:
				h.Write(t)
				t = t[:0]
				h.Write(body)
			case PlaceholderTimestamp:
				t = append(t, m.timestamp...)
			default:
				t = append(t, p...)
			}
		}
		h.Write(t)
	}
	km.text = t
	h.Sum(km.sum[:0])
	return km
}
