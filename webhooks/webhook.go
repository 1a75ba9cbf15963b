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
	"time"
	"unicode/utf8"

	"github.com/squallhq/squall/webhooks/signing"
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
	// Signature, when not nil, is the signature check the intake applies
	// to the request (headers and raw body) in addition to the token.
	Signature *signing.Verifier
	// Dedupe, when not nil, makes repeated deliveries produce one event
	// (delivery.go).
	Dedupe *Dedupe
	// RateLimit, when not nil, bounds the rate of calls.
	RateLimit *RateLimit
	// AllowIPs, when not empty, lists the client addresses allowed to
	// call; see [Webhook.Allows].
	AllowIPs []netip.Prefix

	tokens    []tokenEntry
	collector *Collector
}

// tokenEntry is one accepted token, kept as its SHA-256.
type tokenEntry struct {
	hash     [sha256.Size]byte
	notAfter time.Time
	short    bool // shorter than MinTokenLen
}

// MinTokenLen is the fewest characters a webhook token may have when no
// signature protects the webhook: the token is then the only credential,
// and a short one is guessed.
const MinTokenLen = 16

// errShortToken refuses a short token of a webhook without a signature.
var errShortToken = fmt.Errorf("shorter than %d characters: use a long random token, or protect the webhook with a signature", MinTokenLen)

// checkTokenLengths refuses tokens shorter than MinTokenLen unless a
// signature protects the webhook; list says the file wrote "tokens".
// Errors never contain the token.
func (w *Webhook) checkTokenLengths(list bool) error {
	if w.Signature != nil {
		return nil
	}
	var errs []error
	for i, t := range w.tokens {
		if !t.short {
			continue
		}
		field := "token"
		if list {
			field = "tokens[" + strconv.Itoa(i) + "]"
		}
		errs = append(errs, &ValidationError{Field: field, Err: errShortToken})
	}
	return errors.Join(errs...)
}

// Parse reads one webhook file (JSON, at most MaxFileSize bytes), validates
// it, and compiles its collector. Decoding is strict: unknown or duplicate
// fields, and fields of the wrong JSON type, are errors. Every problem found
// is reported (joined with [errors.Join]); each is a [*ValidationError]
// naming the field. Errors never contain the token or the secret.
//
// The "file" and "env" entries of tokens and secrets are read from the
// working directory and the process environment; [ParseWith] chooses.
func Parse(r io.Reader) (*Webhook, error) { return ParseWith(r, osSource("")) }

// ParseWith is [Parse] with the "file" and "env" entries of tokens and
// secrets resolved by src.
func ParseWith(r io.Reader, src Source) (*Webhook, error) {
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
	o, err := decodeObject(root, "", "id", "token", "tokens", "tenant_id", "max_payload_size", "signature", "collector_config",
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

	tokens, err := decodeCredentials(o, "token", "tokens", src)
	check(err)
	for _, t := range tokens {
		w.tokens = append(w.tokens, tokenEntry{hash: sha256.Sum256(t.value), notAfter: t.notAfter,
			short: utf8.RuneCount(t.value) < MinTokenLen})
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
		w.Signature, err = decodeSignature(o.fields["signature"], src)
		check(err)
	}

	if o.present("dedupe") {
		w.Dedupe, err = decodeDedupe(o.fields["dedupe"])
		check(err)
	}
	check(w.bindDedupe())
	check(w.checkTokenLengths(o.present("tokens")))
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
	if len(w.tokens) == 0 {
		errs = append(errs, &ValidationError{Field: "token", Err: ErrRequired})
	}
	errs = append(errs, w.checkTokenLengths(len(w.tokens) > 1))
	if w.MaxPayloadSize <= 0 {
		errs = append(errs, &ValidationError{Field: "max_payload_size", Value: strconv.FormatInt(w.MaxPayloadSize, 10), Err: errSize})
	}
	if w.collector == nil {
		errs = append(errs, &ValidationError{Field: "collector_config", Err: ErrRequired})
	}
	errs = append(errs, w.validateDelivery())
	return errors.Join(errs...)
}

// CheckToken reports whether tok is one of the webhook's tokens valid now;
// see [Webhook.MatchToken].
func (w *Webhook) CheckToken(tok string) bool {
	_, ok := w.MatchToken(tok, time.Now())
	return ok
}

// MatchToken returns the index of the entry of the webhook's tokens that tok
// is, among those valid at now (not past their not_after). The comparison
// takes the same time whatever tok is: both sides are hashed with SHA-256
// first, so not even the token's length leaks, and every entry is compared.
func (w *Webhook) MatchToken(tok string, now time.Time) (int, bool) {
	h := sha256.Sum256([]byte(tok))
	index := -1
	for i := range w.tokens {
		e := &w.tokens[i]
		eq := subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1
		if eq && index < 0 && (e.notAfter.IsZero() || !now.After(e.notAfter)) {
			index = i
		}
	}
	return index, index >= 0
}

// Tokens returns the number of entries of the webhook's tokens.
func (w *Webhook) Tokens() int { return len(w.tokens) }

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
		attrs = append(attrs, slog.Any("signature", w.Signature))
	}
	return slog.GroupValue(attrs...)
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

// decodeSignature reads the "signature" object. A "scheme" chooses the
// verifier; without one the object is read as older files wrote it: the
// generic hmac form when it has "header", "prefix" or "encoding", else
// github.
func decodeSignature(raw json.RawMessage, src Source) (*signing.Verifier, error) {
	o, err := decodeObject(raw, "signature", "scheme", "secret", "secrets", "tolerance",
		"header", "prefix", "encoding", "algorithm", "timestamp_header", "content")
	if err != nil {
		return nil, err
	}
	var cfg signing.Config
	var errs []error
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"scheme", &cfg.Scheme},
		{"header", &cfg.Header},
		{"prefix", &cfg.Prefix},
		{"encoding", &cfg.Encoding},
		{"algorithm", &cfg.Algorithm},
		{"timestamp_header", &cfg.TimestampHeader},
		{"content", &cfg.Content},
	} {
		var err error
		*f.dst, err = o.str(f.key, false)
		errs = append(errs, err)
	}
	if cfg.Scheme == "" {
		cfg.Scheme = signing.SchemeGitHub
		if o.present("header") || o.present("prefix") || o.present("encoding") {
			cfg.Scheme = signing.SchemeHMAC
		}
	}
	if o.present("tolerance") {
		tol, err := o.str("tolerance", true)
		if err == nil {
			if cfg.Tolerance, err = time.ParseDuration(tol); err != nil || cfg.Tolerance <= 0 {
				err = &ValidationError{Field: "signature.tolerance", Value: tol, Err: errors.New(`must be a positive duration such as "5m"`)}
			}
		}
		errs = append(errs, err)
	}
	creds, err := decodeCredentials(o, "secret", "secrets", src)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	keys := make([]signing.Key, len(creds))
	for i, c := range creds {
		keys[i] = signing.Key{Secret: c.value, NotAfter: c.notAfter}
	}
	v, err := signing.New(cfg, keys)
	if err != nil {
		return nil, signatureError(err, o.present("secret"))
	}
	return v, nil
}

// signatureError turns the option errors of signing.New into validation
// errors naming the field of the webhook file: "secret" rather than
// "secrets[0]" when the file gives one secret.
func signatureError(err error, single bool) error {
	var errs []error
	var oe *signing.OptionError
	for _, e := range unjoin(err) {
		if errors.As(e, &oe) {
			option := oe.Option
			if single && option == "secrets[0]" {
				option = "secret"
			}
			errs = append(errs, &ValidationError{Field: "signature." + option, Value: oe.Value, Err: oe.Err})
		} else {
			errs = append(errs, &ValidationError{Field: "signature", Err: e})
		}
	}
	return errors.Join(errs...)
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
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
