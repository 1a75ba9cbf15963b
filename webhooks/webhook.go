package webhooks

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
)

// Limits of a webhook file.
const (
	// MaxFileSize bounds the size of one webhook file: 1 MiB.
	MaxFileSize = 1 << 20
	// MaxIDLen bounds the length of a webhook id.
	MaxIDLen = 128
)

// Webhook is one validated webhook definition with its compiled collector.
// Build it with [Parse] (or [LoadDir]); the zero value is not usable.
//
// The token and the signature secret are unexported and never printed: the
// String, Format and LogValue methods redact them. Check them with
// [Webhook.CheckToken] and [Signature.Verify].
type Webhook struct {
	// ID names the webhook and is the path segment of its endpoint
	// (/engine/webhook/event/{id}). It matches ^[A-Za-z0-9_.-]+$, is at most
	// MaxIDLen bytes long, and is neither "." nor "..".
	ID string
	// TenantID, when not empty, is the metadata.tenant_id of every event of
	// this webhook, whatever the intake's own tenant.
	TenantID string
	// MaxPayloadSize is the largest accepted request body in bytes.
	MaxPayloadSize int64
	// Signature, when not nil, is the HMAC check the intake applies to the
	// raw body in addition to the token.
	Signature *Signature
	// Dedupe, when not nil, makes repeated deliveries produce one event
	// (delivery.go).
	Dedupe *Dedupe
	// RateLimit, when not nil, bounds the rate of calls.
	RateLimit *RateLimit
	// AllowIPs, when not empty, lists the client addresses allowed to
	// call; see [Webhook.Allows].
	AllowIPs []netip.Prefix

	tokenSet  bool
	tokenHash [sha256.Size]byte
	collector *Collector
}

// Parse reads one webhook file (JSON, at most MaxFileSize bytes), validates
// it, and compiles its collector. Decoding is strict: unknown or duplicate
// fields, and fields of the wrong JSON type, are errors. Every problem found
// is reported (joined with [errors.Join]); each is a [*ValidationError]
// naming the field. Errors never contain the token or the secret.
func Parse(r io.Reader) (*Webhook, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read webhook: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, &ValidationError{Field: "(file)", Err: fmt.Errorf("larger than %d bytes", MaxFileSize)}
	}
	var root json.RawMessage
	if err := decodeJSON(data, &root); err != nil {
		return nil, &ValidationError{Field: "(file)", Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	o, err := decodeObject(root, "", "id", "token", "tenant_id", "max_payload_size", "signature", "collector_config",
		"dedupe", "rate_limit", "allow_ips")
	if err != nil {
		return nil, err
	}

	w := &Webhook{MaxPayloadSize: DefaultMaxPayloadSize}
	var errs []error
	check := func(err error) { errs = append(errs, err) }

	if w.ID, err = o.str("id", true); err == nil {
		err = validateID(w.ID)
	}
	check(err)

	token, err := o.str("token", true)
	check(err)
	if err == nil {
		w.setToken(token)
	}

	if o.present("tenant_id") {
		w.TenantID, err = o.str("tenant_id", true)
		check(err)
	}

	if o.present("max_payload_size") {
		w.MaxPayloadSize, err = decodeSize(o.fields["max_payload_size"])
		if err != nil {
			check(&ValidationError{Field: "max_payload_size", Value: jsonText(o.fields["max_payload_size"]), Err: err})
		}
	}

	if o.present("signature") {
		w.Signature, err = decodeSignature(o.fields["signature"])
		check(err)
	}

	if o.present("dedupe") {
		w.Dedupe, err = decodeDedupe(o.fields["dedupe"])
		check(err)
	}
	if o.present("rate_limit") {
		w.RateLimit, err = decodeRateLimit(o.fields["rate_limit"])
		check(err)
	}
	if o.present("allow_ips") {
		w.AllowIPs, err = decodeAllowIPs(o.fields["allow_ips"])
		check(err)
	}

	if !o.present("collector_config") {
		check(&ValidationError{Field: "collector_config", Err: ErrRequired})
	} else {
		cfg, err := decodeCollectorConfig(o.fields["collector_config"])
		cfg.MaxOutputSize = outputBudget(w.MaxPayloadSize)
		if err == nil {
			w.collector, err = NewCollector(cfg, w.TenantID)
		}
		check(err)
	}

	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// Validate checks the invariants of w, for callers that change a parsed
// Webhook. [Parse] already applies the same checks.
func (w *Webhook) Validate() error {
	var errs []error
	errs = append(errs, validateID(w.ID))
	if !w.tokenSet {
		errs = append(errs, &ValidationError{Field: "token", Err: ErrRequired})
	}
	if w.MaxPayloadSize <= 0 {
		errs = append(errs, &ValidationError{Field: "max_payload_size", Value: strconv.FormatInt(w.MaxPayloadSize, 10), Err: errSize})
	}
	if w.Signature != nil {
		errs = append(errs, w.Signature.validate())
	}
	if w.collector == nil {
		errs = append(errs, &ValidationError{Field: "collector_config", Err: ErrRequired})
	}
	return errors.Join(errs...)
}

// CheckToken reports whether tok is the webhook's token. The comparison
// takes the same time whatever tok is (both sides are hashed with SHA-256
// first, so not even the token's length leaks).
func (w *Webhook) CheckToken(tok string) bool {
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], w.tokenHash[:]) == 1 && w.tokenSet
}

// Collector returns the compiled collector of the webhook.
func (w *Webhook) Collector() *Collector { return w.collector }

// String describes the webhook without its token or secret.
func (w Webhook) String() string {
	s := fmt.Sprintf("webhook %s (max_payload_size=%d", w.ID, w.MaxPayloadSize)
	if w.TenantID != "" {
		s += " tenant_id=" + w.TenantID
	}
	if w.Signature != nil {
		s += " signature=" + w.Signature.String()
	}
	if w.Dedupe != nil {
		s += " dedupe=" + w.Dedupe.String()
	}
	if w.RateLimit != nil {
		s += " rate_limit=" + w.RateLimit.String()
	}
	if len(w.AllowIPs) > 0 {
		s += fmt.Sprintf(" allow_ips=%v", w.AllowIPs)
	}
	return s + " token=[redacted])"
}

// Format implements fmt.Formatter so that no verb, not even %#v or %d,
// prints the token or the secret.
func (w Webhook) Format(f fmt.State, _ rune) { fmt.Fprint(f, w.String()) }

// LogValue implements slog.LogValuer without the token or the secret.
func (w Webhook) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("id", w.ID),
		slog.Int64("max_payload_size", w.MaxPayloadSize),
	}
	if w.TenantID != "" {
		attrs = append(attrs, slog.String("tenant_id", w.TenantID))
	}
	if w.Signature != nil {
		attrs = append(attrs, slog.Any("signature", *w.Signature))
	}
	return slog.GroupValue(attrs...)
}

func (w *Webhook) setToken(token string) {
	w.tokenHash = sha256.Sum256([]byte(token))
	w.tokenSet = true
}

// validateID checks a webhook id; see [Webhook.ID].
func validateID(id string) error {
	switch {
	case id == "":
		return &ValidationError{Field: "id", Err: ErrRequired}
	case len(id) > MaxIDLen:
		return &ValidationError{Field: "id", Value: id, Err: fmt.Errorf("longer than %d bytes", MaxIDLen)}
	case id == "." || id == "..":
		return &ValidationError{Field: "id", Value: id, Err: errors.New(`must not be "." or ".."`)}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return &ValidationError{Field: "id", Value: id, Err: errors.New("must contain only ASCII letters, digits, '_', '.' and '-'")}
		}
	}
	return nil
}

// decodeSize decodes max_payload_size: a JSON number (a whole number of
// bytes) or a string accepted by [ParseSize].
func decodeSize(raw json.RawMessage) (int64, error) {
	var v any
	if err := decodeJSON(raw, &v); err != nil {
		return 0, errSize
	}
	switch v := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 {
			return 0, errSize
		}
		return n, nil
	case string:
		return ParseSize(v)
	}
	return 0, errSize
}

func decodeSignature(raw json.RawMessage) (*Signature, error) {
	o, err := decodeObject(raw, "signature", "header", "secret", "prefix", "encoding")
	if err != nil {
		return nil, err
	}
	s := &Signature{}
	var errs []error
	var secret string
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{
		{"header", &s.Header, true},
		{"secret", &secret, true},
		{"prefix", &s.Prefix, false},
		{"encoding", &s.Encoding, false},
	} {
		var err error
		*f.dst, err = o.str(f.key, f.required)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.secret = []byte(secret)
	if s.Encoding == "" {
		s.Encoding = EncodingHex
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// validate checks the fields of a Signature.
func (s *Signature) validate() error {
	var errs []error
	if !validHeaderName(s.Header) {
		errs = append(errs, &ValidationError{Field: "signature.header", Value: s.Header, Err: errors.New("must be an HTTP header name")})
	}
	if len(s.secret) == 0 {
		errs = append(errs, &ValidationError{Field: "signature.secret", Err: ErrRequired})
	}
	if s.Encoding != EncodingHex && s.Encoding != EncodingBase64 {
		errs = append(errs, &ValidationError{Field: "signature.encoding", Value: s.Encoding, Err: errors.New(`must be "hex" or "base64"`)})
	}
	return errors.Join(errs...)
}

// validHeaderName reports whether s is a non-empty HTTP field name (an RFC
// 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func decodeCollectorConfig(raw json.RawMessage) (CollectorConfig, error) {
	var cfg CollectorConfig
	o, err := decodeObject(raw, "collector_config", "event_type", "payload")
	if err != nil {
		return cfg, err
	}
	et, etErr := o.str("event_type", true)
	cfg.EventType = et
	var plErr error
	if !o.present("payload") {
		plErr = &ValidationError{Field: "collector_config.payload", Err: ErrRequired}
	} else if err := decodeJSON(o.fields["payload"], &cfg.Payload); err != nil || cfg.Payload == nil {
		plErr = &ValidationError{Field: "collector_config.payload", Err: errors.New("must be a JSON object")}
	}
	return cfg, errors.Join(etErr, plErr)
}
