package signing

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxTimestampLen bounds a timestamp's digits: Unix seconds up to the year
// 33658.
const maxTimestampLen = 12

// message is what a request's headers carry, parsed.
type message struct {
	id        string
	timestamp string // as sent: the signed content uses the text
	tsHeader  string // the header it came from
	unix      int64
	n         int
	lens      [MaxSignatures]uint8 // of the decoded signatures, in buf
	buf       [MaxSignatures * sigSlot]byte
}

// sig returns the decoded signature i.
func (m *message) sig(i int) []byte { return m.buf[i*sigSlot : i*sigSlot+int(m.lens[i])] }

// maxDigest is the size of the largest digest, SHA-512's; sigSlot is the
// room for one decoded signature (base64 decodes padding into up to two
// more bytes).
const (
	maxDigest = 64
	sigSlot   = maxDigest + 2
)

// add decodes a signature into m, or reports that it is malformed or one
// too many. A digest longer than any algorithm's is malformed.
func (m *message) add(s, encoding string) bool {
	if m.n == MaxSignatures {
		return false
	}
	dst := m.buf[m.n*sigSlot : (m.n+1)*sigSlot]
	var n int
	if encoding == EncodingBase64 {
		if base64.StdEncoding.DecodedLen(len(s)) > sigSlot {
			return false
		}
		var err error
		if n, err = base64.StdEncoding.Decode(dst, []byte(s)); err != nil {
			return false
		}
	} else {
		if len(s)%2 != 0 || len(s)/2 > maxDigest {
			return false
		}
		for i := 0; i < len(s); i += 2 {
			hi, ok1 := fromHex(s[i])
			lo, ok2 := fromHex(s[i+1])
			if !ok1 || !ok2 {
				return false
			}
			dst[i/2] = hi<<4 | lo
		}
		n = len(s) / 2
	}
	if n == 0 || n > maxDigest {
		return false
	}
	m.lens[m.n] = uint8(n)
	m.n++
	return true
}

// fromHex decodes one hexadecimal digit, of either case.
func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Headers gives the values of a request's header fields; [http.Header] is
// one, and so is a view of another HTTP server's request.
type Headers interface {
	// Get returns the first value of the field name (any case), or "".
	Get(name string) string
	// Values returns all the values of the field name (any case).
	Values(name string) []string
}

// has reports whether h has the field name, even with an empty value. Only
// an empty or missing first value asks for all of them.
func has(h Headers, name string) bool {
	return h.Get(name) != "" || len(h.Values(name)) > 0
}

// Verify checks the signature of a request with headers h and raw body at
// time now. It returns the index of the key that verified, or an [*Error]
// wrapping ErrMissing, ErrMalformed, ErrMismatch or ErrTimestamp. Keys past
// their NotAfter verify nothing. The timestamp is checked after the
// signature, so that ErrTimestamp means a genuine but stale (or
// future) request, a replay.
func (v *Verifier) Verify(h Headers, body []byte, now time.Time) (int, error) {
	index, _, err := v.VerifyID(h, body, now)
	return index, err
}

// SignsID reports whether the scheme's signature covers a message id
// (standard-webhooks): [Verifier.VerifyID] returns it.
func (v *Verifier) SignsID() bool { return v.scheme == SchemeStandardWebhooks }

// VerifyID is [Verifier.Verify] that also returns the message id the
// signature covers, under whichever header family verified; it is "" when
// the scheme signs no id ([Verifier.SignsID]). A request with both the
// webhook-id and the svix-id header, with different values, is refused
// with ErrAmbiguous before any key is tried.
func (v *Verifier) VerifyID(h Headers, body []byte, now time.Time) (int, string, error) {
	var m message
	if err := v.parse(h, &m); err != nil {
		return -1, "", err
	}
	index := -1
	for i := range v.keys {
		k := &v.keys[i]
		if !k.valid(now) {
			continue
		}
		km := v.mac(i, &m, body)
		sum := km.sum[:km.h.Size()]
		for j := range m.n {
			if hmac.Equal(m.sig(j), sum) {
				index = i
				break
			}
		}
		v.macs[i].Put(km)
		if index >= 0 {
			break
		}
	}
	if index < 0 {
		header := v.header
		if m.tsHeader == HeaderSvixTimestamp {
			header = HeaderSvixSignature
		}
		return -1, "", &Error{Header: header, Err: ErrMismatch}
	}
	if v.tsHeader != "" {
		t := time.Unix(m.unix, 0)
		if d := now.Sub(t); d > v.tolerance || d < -v.tolerance {
			return -1, "", &Error{Header: m.tsHeader, Err: ErrTimestamp}
		}
	}
	return index, m.id, nil
}

// parse reads the headers of the scheme into m.
func (v *Verifier) parse(h Headers, m *message) error {
	if v.scheme == SchemeStandardWebhooks {
		return parseStandard(h, m)
	}
	value, err := headerValue(h, v.header)
	if err != nil {
		return err
	}
	if v.scheme == SchemeStripe {
		return parseStripe(value, m)
	}
	if v.tsHeader != "" {
		if err := parseTimestamp(h, v.tsHeader, m); err != nil {
			return err
		}
	}
	if len(value) < len(v.prefix) || !strings.EqualFold(value[:len(v.prefix)], v.prefix) {
		return &Error{Header: v.header, Err: ErrMalformed}
	}
	if !m.add(value[len(v.prefix):], v.encoding) {
		return &Error{Header: v.header, Err: ErrMalformed}
	}
	return nil
}

// parseTimestamp reads the timestamp header name into m.
func parseTimestamp(h Headers, name string, m *message) error {
	value, err := headerValue(h, name)
	if err != nil {
		return err
	}
	if m.unix, err = parseUnix(value); err != nil {
		return &Error{Header: name, Err: ErrMalformed}
	}
	m.timestamp, m.tsHeader = value, name
	return nil
}

// standardHeaders and svixHeaders name the id, timestamp and signature
// headers of Standard Webhooks, and the same under Svix's older names,
// read when a request has no webhook-signature but a svix-signature.
var (
	standardHeaders = [3]string{HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature}
	svixHeaders     = [3]string{HeaderSvixID, HeaderSvixTimestamp, HeaderSvixSignature}
)

// parseStandard reads the Standard Webhooks headers into m. The signature
// header holds space-separated "<version>,<base64>" entries, of which only
// v1 ones count.
func parseStandard(h Headers, m *message) error {
	names := standardHeaders
	if !has(h, HeaderWebhookSignature) && has(h, HeaderSvixSignature) {
		names = svixHeaders
	}
	value, err := headerValue(h, names[2])
	if err != nil {
		return err
	}
	if m.id, err = headerValue(h, names[0]); err != nil {
		return err
	}
	// The id of the other family, when present, must be the same: a
	// reader of it (a dedupe key, a log line) would otherwise see an id
	// the signature does not cover.
	other := HeaderSvixID
	if names[0] == HeaderSvixID {
		other = HeaderWebhookID
	}
	if has(h, other) && strings.TrimSpace(h.Get(other)) != m.id {
		return &Error{Header: other, Err: ErrAmbiguous}
	}
	if err := parseTimestamp(h, names[1], m); err != nil {
		return err
	}
	for entry := range strings.FieldsSeq(value) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			return &Error{Header: names[2], Err: ErrMalformed}
		}
		if version != "v1" {
			continue // v1a (asymmetric) and future versions
		}
		if !m.add(sig, EncodingBase64) {
			return &Error{Header: names[2], Err: ErrMalformed}
		}
	}
	return nil
}

// parseStripe reads a Stripe-Signature value: comma-separated key=value
// pairs with exactly one t (the timestamp) and v1 signatures; other keys
// (v0, test-mode schemes) are ignored.
func parseStripe(value string, m *message) error {
	malformed := &Error{Header: HeaderStripe, Err: ErrMalformed}
	seenT := false
	for pair := range strings.SplitSeq(value, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || key == "" {
			return malformed
		}
		switch key {
		case "t":
			unix, err := parseUnix(val)
			if err != nil || seenT {
				return malformed
			}
			seenT, m.unix, m.timestamp, m.tsHeader = true, unix, val, HeaderStripe
		case "v1":
			if !m.add(val, EncodingHex) {
				return malformed
			}
		}
	}
	if !seenT {
		return malformed
	}
	return nil
}

// headerValue returns the first value of the header name, trimmed, or an
// error when it is missing, empty or longer than MaxHeaderLen.
func headerValue(h Headers, name string) (string, error) {
	value := h.Get(name)
	if len(value) > MaxHeaderLen {
		return "", &Error{Header: name, Err: ErrMalformed}
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return "", &Error{Header: name, Err: ErrMissing}
	}
	return value, nil
}

// parseUnix parses Unix seconds written in decimal digits only.
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > maxTimestampLen {
		return 0, strconv.ErrRange
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// Sign returns the headers that make a request with body verify at now,
// signed with the first key valid at now (none when no key is). id is the
// message id of standard-webhooks and ignored by the other schemes. It is
// meant for tests and clients.
func (v *Verifier) Sign(body []byte, now time.Time, id string) http.Header {
	h := make(http.Header)
	for i := range v.keys {
		k := &v.keys[i]
		if !k.valid(now) {
			continue
		}
		m := message{id: id, timestamp: strconv.FormatInt(now.Unix(), 10)}
		km := v.mac(i, &m, body)
		sum := slices.Clone(km.sum[:km.h.Size()])
		v.macs[i].Put(km)
		switch v.scheme {
		case SchemeStandardWebhooks:
			h.Set(HeaderWebhookID, id)
			h.Set(HeaderWebhookTimestamp, m.timestamp)
			h.Set(HeaderWebhookSignature, "v1,"+base64.StdEncoding.EncodeToString(sum))
		case SchemeStripe:
			h.Set(HeaderStripe, "t="+m.timestamp+",v1="+hex.EncodeToString(sum))
		default:
			enc := hex.EncodeToString(sum)
			if v.encoding == EncodingBase64 {
				enc = base64.StdEncoding.EncodeToString(sum)
			}
			h.Set(v.header, v.prefix+enc)
			if v.tsHeader != "" {
				h.Set(v.tsHeader, m.timestamp)
			}
		}
		break
	}
	return h
}
