package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/webhooks/signing"
)

// Limits of the delivery settings of a webhook file ("dedupe", "rate_limit",
// "allow_ips").
const (
	// DefaultDedupeWindow is the window of "dedupe" when it names none.
	DefaultDedupeWindow = 24 * time.Hour
	// MaxDedupeWindow bounds "dedupe.window": 30 days.
	MaxDedupeWindow = 30 * 24 * time.Hour
	// MaxDeliveryIDLen bounds the length of a delivery id (the header or
	// the JMESPath result); a longer one is refused (400).
	MaxDeliveryIDLen = 256
	// MaxRate bounds "rate_limit.rate", in calls per second.
	MaxRate = 1e6
	// MaxBurst bounds "rate_limit.burst".
	MaxBurst = 1_000_000
	// MaxAllowIPs bounds the length of "allow_ips".
	MaxAllowIPs = 1024
)

// Errors of [Dedupe.Key]. Match them with [errors.Is].
var (
	// ErrNoDeliveryID reports a call without a delivery id (the header is
	// missing or empty, or the expression gives null or ""): 400.
	ErrNoDeliveryID = errors.New("no delivery id")
	// ErrBadDeliveryID reports a delivery id longer than MaxDeliveryIDLen,
	// or an expression result that is not a string or a number: 400.
	ErrBadDeliveryID = errors.New("invalid delivery id")
)

// Dedupe is the "dedupe" setting of a webhook: calls that carry the delivery
// id of a call accepted less than Window ago produce no new event; they are
// answered with the first call's event id. The id comes from a header or,
// with JMESPath, from the body.
type Dedupe struct {
	// Header is the canonical name of the header carrying the delivery id
	// (such as Webhook-Id), or "".
	Header string
	// JMESPath is the expression that finds the delivery id in the body,
	// or "". Exactly one of Header and JMESPath is set.
	JMESPath string
	// Window is how long a delivery id is remembered after its call was
	// accepted.
	Window time.Duration
	// SignedID is set when the webhook's signature scheme signs a message
	// id (standard-webhooks) and Header names it (Webhook-Id or Svix-Id):
	// the delivery id is then the id the signature verified, under
	// whichever header family the call used, never an unsigned header.
	SignedID bool

	expr *expression
}

// Key returns the delivery id of a call: header is the value of the Header
// header (ignored with JMESPath), body the raw body (ignored with a
// header). Errors wrap [ErrNoDeliveryID] or [ErrBadDeliveryID]; a body that
// is not JSON wraps [ErrBodyNotJSON].
func (d *Dedupe) Key(header string, body []byte) (string, error) {
	if d.expr == nil {
		return checkDeliveryID(strings.TrimSpace(header))
	}
	var v any
	if err := decodeJSON(body, &v); err != nil {
		return "", ErrBodyNotJSON
	}
	r, err := d.expr.search(v)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrBadDeliveryID, truncate(err.Error(), maxErrorText))
	}
	switch r := r.(type) {
	case nil:
		return "", ErrNoDeliveryID
	case string:
		return checkDeliveryID(r)
	case json.Number:
		return checkDeliveryID(r.String())
	case float64:
		return checkDeliveryID(strconv.FormatFloat(r, 'g', -1, 64))
	}
	return "", fmt.Errorf("%w: %s gives a %T, not a string or a number", ErrBadDeliveryID, d.JMESPath, r)
}

func checkDeliveryID(id string) (string, error) {
	switch {
	case id == "":
		return "", ErrNoDeliveryID
	case len(id) > MaxDeliveryIDLen:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadDeliveryID, MaxDeliveryIDLen)
	}
	return id, nil
}

// String describes the setting.
func (d Dedupe) String() string {
	if d.SignedID {
		return "signed message id window " + d.Window.String()
	}
	if d.Header != "" {
		return "header " + d.Header + " window " + d.Window.String()
	}
	return "jmespath " + strconv.Quote(d.JMESPath) + " window " + d.Window.String()
}

// RateLimit is the "rate_limit" setting of a webhook: a token bucket that
// fills with Rate calls per second up to Burst, for the whole webhook or,
// with PerClient, for each client address.
type RateLimit struct {
	// Rate is the sustained rate, in calls per second (> 0).
	Rate float64
	// Burst is the number of calls allowed at once (≥ 1; default the
	// rate rounded up).
	Burst int
	// PerClient gives each client address a bucket of its own.
	PerClient bool
}

// String describes the setting.
func (l RateLimit) String() string {
	s := fmt.Sprintf("rate %g/s burst %d", l.Rate, l.Burst)
	if l.PerClient {
		s += " per client"
	}
	return s
}

// Allows reports whether a call from addr may reach the webhook: always
// when the webhook has no "allow_ips", otherwise when one of its prefixes
// contains addr.
func (w *Webhook) Allows(addr netip.Addr) bool {
	if len(w.AllowIPs) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range w.AllowIPs {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// signedIDHeaders are the headers that carry the message id a
// standard-webhooks signature covers.
var signedIDHeaders = []string{signing.HeaderWebhookID, signing.HeaderSvixID}

// bindDedupe ties a dedupe header to the signature when the scheme signs
// the message id: the header must be the id's (either family's name, both
// meaning the verified id), since any other header could be changed by
// whoever replays a signed call. A body expression needs no binding: the
// body is signed.
func (w *Webhook) bindDedupe() error {
	d := w.Dedupe
	if d == nil || d.Header == "" || w.Signature == nil || !w.Signature.SignsID() {
		return nil
	}
	if !slices.Contains(signedIDHeaders, d.Header) {
		return &ValidationError{Field: "dedupe.header", Value: d.Header,
			Err: fmt.Errorf("the %s signature covers the message id: dedupe on %s (or %s), or on the body with \"jmespath\"",
				signing.SchemeStandardWebhooks, signing.HeaderWebhookID, signing.HeaderSvixID)}
	}
	d.SignedID = true
	return nil
}

// validateDelivery checks the delivery settings of a webhook changed after
// [Parse], for [Webhook.Validate].
func (w *Webhook) validateDelivery() error {
	var errs []error
	if d := w.Dedupe; d != nil {
		if (d.Header == "") == (d.expr == nil) {
			errs = append(errs, &ValidationError{Field: "dedupe", Err: errors.New(`set "header" or "jmespath", not both`)})
		}
		if d.Header != "" && !httpguard.ValidFieldName(d.Header) {
			errs = append(errs, &ValidationError{Field: "dedupe.header", Value: d.Header, Err: errors.New("must be an HTTP header name")})
		}
		// SignedID exactly when the scheme signs an id and the header
		// is that id's: bindDedupe's rule.
		signsID := w.Signature != nil && w.Signature.SignsID() && d.Header != ""
		if d.SignedID != (signsID && slices.Contains(signedIDHeaders, d.Header)) || signsID && !d.SignedID {
			errs = append(errs, &ValidationError{Field: "dedupe.header", Value: d.Header,
				Err: fmt.Errorf("with a %s signature, must be %s or %s (the signed id), and only then keys on the signed id",
					signing.SchemeStandardWebhooks, signing.HeaderWebhookID, signing.HeaderSvixID)})
		}
		if d.Window < time.Second || d.Window > MaxDedupeWindow {
			errs = append(errs, &ValidationError{Field: "dedupe.window", Value: d.Window.String(), Err: fmt.Errorf("must be from 1s to %s", MaxDedupeWindow)})
		}
	}
	if l := w.RateLimit; l != nil {
		if !(l.Rate > 0 && l.Rate <= MaxRate) {
			errs = append(errs, &ValidationError{Field: "rate_limit.rate", Value: strconv.FormatFloat(l.Rate, 'g', -1, 64), Err: fmt.Errorf("must be above 0 and at most %g", float64(MaxRate))})
		}
		if l.Burst < 1 || l.Burst > MaxBurst {
			errs = append(errs, &ValidationError{Field: "rate_limit.burst", Value: strconv.Itoa(l.Burst), Err: fmt.Errorf("must be from 1 to %d", MaxBurst)})
		}
	}
	for i, p := range w.AllowIPs {
		if !p.IsValid() || p.Masked() != p {
			errs = append(errs, &ValidationError{Field: fmt.Sprintf("allow_ips[%d]", i), Value: p.String(), Err: errors.New("not a CIDR prefix without host bits")})
		}
	}
	return errors.Join(errs...)
}

// decodeDedupe decodes the "dedupe" member.
func decodeDedupe(raw json.RawMessage) (*Dedupe, error) {
	o, err := decodeObject(raw, "dedupe", "header", "jmespath", "window")
	if err != nil {
		return nil, err
	}
	d := &Dedupe{Window: DefaultDedupeWindow}
	var errs []error
	header, err := o.str("header", false)
	errs = append(errs, err)
	path, err := o.str("jmespath", false)
	errs = append(errs, err)
	switch {
	case o.present("header") && o.present("jmespath"):
		errs = append(errs, &ValidationError{Field: "dedupe", Err: errors.New(`set "header" or "jmespath", not both`)})
	case !o.present("header") && !o.present("jmespath"):
		errs = append(errs, &ValidationError{Field: "dedupe", Err: errors.New(`set "header" or "jmespath"`)})
	case o.present("header"):
		if !httpguard.ValidFieldName(header) {
			errs = append(errs, &ValidationError{Field: "dedupe.header", Value: header, Err: errors.New("must be an HTTP header name")})
		}
		d.Header = http.CanonicalHeaderKey(header)
	default:
		d.JMESPath = path
		if d.expr, err = compileExpression(path); err != nil {
			errs = append(errs, &ValidationError{Field: "dedupe.jmespath", Value: path, Err: err})
		}
	}
	if o.present("window") {
		s, err := o.str("window", true)
		if err == nil {
			d.Window, err = time.ParseDuration(s)
			if err != nil || d.Window < time.Second || d.Window > MaxDedupeWindow {
				err = &ValidationError{Field: "dedupe.window", Value: s,
					Err: fmt.Errorf("must be a duration from 1s to %s, such as \"24h\"", MaxDedupeWindow)}
			}
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeRateLimit decodes the "rate_limit" member.
func decodeRateLimit(raw json.RawMessage) (*RateLimit, error) {
	o, err := decodeObject(raw, "rate_limit", "rate", "burst", "per_client")
	if err != nil {
		return nil, err
	}
	l := &RateLimit{}
	var errs []error
	if !o.present("rate") {
		errs = append(errs, &ValidationError{Field: "rate_limit.rate", Err: ErrRequired})
	} else if err := json.Unmarshal(o.fields["rate"], &l.Rate); err != nil || !(l.Rate > 0 && l.Rate <= MaxRate) || math.IsNaN(l.Rate) {
		errs = append(errs, &ValidationError{Field: "rate_limit.rate", Value: string(o.fields["rate"]),
			Err: fmt.Errorf("must be a number of calls per second above 0 and at most %g", float64(MaxRate))})
	}
	if o.present("burst") {
		if err := json.Unmarshal(o.fields["burst"], &l.Burst); err != nil || l.Burst < 1 || l.Burst > MaxBurst {
			errs = append(errs, &ValidationError{Field: "rate_limit.burst", Value: string(o.fields["burst"]),
				Err: fmt.Errorf("must be a whole number from 1 to %d", MaxBurst)})
		}
	} else {
		l.Burst = max(1, int(math.Ceil(l.Rate)))
	}
	if o.present("per_client") {
		if err := json.Unmarshal(o.fields["per_client"], &l.PerClient); err != nil {
			errs = append(errs, &ValidationError{Field: "rate_limit.per_client", Value: string(o.fields["per_client"]), Err: errors.New("must be true or false")})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}

// decodeAllowIPs decodes the "allow_ips" member: a list of CIDR prefixes
// ("10.0.0.0/8", "2001:db8::/32") or single addresses.
func decodeAllowIPs(raw json.RawMessage) ([]netip.Prefix, error) {
	var list []string
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&list); err != nil {
		return nil, &ValidationError{Field: "allow_ips", Err: errors.New("must be a list of strings (CIDR prefixes or addresses)")}
	}
	if len(list) == 0 {
		return nil, &ValidationError{Field: "allow_ips", Err: errors.New("must not be empty (leave it out to allow every address)")}
	}
	if len(list) > MaxAllowIPs {
		return nil, &ValidationError{Field: "allow_ips", Err: fmt.Errorf("more than %d entries", MaxAllowIPs)}
	}
	var errs []error
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		p, err := ParsePrefix(s)
		if err != nil {
			errs = append(errs, &ValidationError{Field: fmt.Sprintf("allow_ips[%d]", i), Value: s, Err: err})
			continue
		}
		out = append(out, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ParsePrefix parses a CIDR prefix ("192.0.2.0/24", "2001:db8::/32") or a
// single address (a /32 or /128). Host bits must be zero, IPv4-mapped IPv6
// prefixes are written as IPv4, and zones are refused, so that a prefix
// means what it reads.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errors.New("not an IP address or CIDR prefix")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP address or CIDR prefix")
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("write an IPv4-mapped prefix as IPv4")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("host bits set (did you mean %s?)", p.Masked())
	}
	return p, nil
}
