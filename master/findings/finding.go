package findings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/master/store"
)

// FindingType is the finding_type of credential findings.
const FindingType = "credential"

// The triage states of a finding. A new finding is Unassigned; PATCH may
// set any state from any other (the API enforces no workflow).
const (
	StateUnassigned    = "Unassigned"
	StateAcknowledged  = "Acknowledged"
	StateInProgress    = "InProgress"
	StateResolved      = "Resolved"
	StateFalsePositive = "FalsePositive"
	StateIgnored       = "Ignored"
)

// States lists the states a finding may have.
var States = []string{StateUnassigned, StateAcknowledged, StateInProgress, StateResolved, StateFalsePositive, StateIgnored}

// Severities and Priorities list the values PATCH accepts for severity
// and priority.
var (
	Severities = []string{"Info", "Low", "Medium", "High", "Critical"}
	Priorities = []string{"Low", "Medium", "High", "Critical"}
)

// Field limits, in bytes.
const (
	maxShort  = 256  // tool_code, hash_algorithm, ticket
	maxMedium = 1024 // username, hash
	maxLong   = 4096 // resource_url, password
)

// FieldError is a request field that is missing, malformed or unknown.
type FieldError struct {
	// Code is MISSING_FIELD, INVALID_FIELD or UNKNOWN_FIELD.
	Code  string
	Field string
	// Reason says what is wrong, for the message.
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %s: %s", e.Field, e.Reason) }

func missing(field string) *FieldError {
	return &FieldError{Code: "MISSING_FIELD", Field: field, Reason: "is required"}
}

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Code: "INVALID_FIELD", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// insertBody is the body of PUT /findings/credentials. Pointers tell a
// missing field from an empty one.
type insertBody struct {
	MonitoredDomainID *int64  `json:"monitored_domain_id"`
	ToolCode          *string `json:"tool_code"`
	ResourceURL       *string `json:"resource_url"`
	Username          *string `json:"username"`
	Password          *string `json:"password"`
	Hash              *string `json:"hash"`
	HashAlgorithm     *string `json:"hash_algorithm"`
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// values of the wrong type and trailing data with a *FieldError or a
// *json.SyntaxError-based error.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// insertField reports whether key is a JSON key of insertBody, exactly.
func insertField(key []byte) bool {
	switch string(key) {
	case "monitored_domain_id", "tool_code", "resource_url", "username", "password", "hash", "hash_algorithm":
		return true
	}
	return false
}

// patchField reports whether key is a field of a PATCH body.
func patchField(key []byte) bool {
	switch string(key) {
	case "state", "ticket", "priority", "severity":
		return true
	}
	return false
}

// checkBody refuses, before any decoder reads it, a body that docs/findings.md
// rules out and that the decoders would accept or mangle: nested deeper than
// jsonlimit.DefaultMaxDepth, invalid UTF-8 (encoding/json would store
// U+FFFD), a repeated key (the decoders keep the last), or a key that is
// not exactly the name of a field (the decoders match keys case-insensitively).
func checkBody(body []byte, field func([]byte) bool) error {
	err := jsonlimit.Check(body, jsonlimit.Limits{ValidUTF8: true, UniqueKeys: true, Key: func(k []byte) error {
		if !field(k) {
			return &FieldError{Code: "UNKNOWN_FIELD", Field: string(k), Reason: "is not a field of this request (keys are matched exactly)"}
		}
		return nil
	}})
	var le *jsonlimit.Error
	if errors.As(err, &le) && le.Reason == jsonlimit.ReasonDuplicate {
		return &FieldError{Code: "DUPLICATE_FIELD", Field: le.Key, Reason: "appears more than once"}
	}
	if le != nil {
		return fmt.Errorf("%w: %w", errBadBody, err)
	}
	return err
}

// decodeInsert decodes an insert body into b: in one pass when it has the
// plain form (decodeInsertPlain, which accepts only bodies checkBody
// accepts: one flat object of exact, unique keys and valid UTF-8, so the
// check is not run again), else after checkBody with segmentio's decoder
// (several times faster than encoding/json) when it accepts the body, else
// with decode, whose errors name the field. FuzzDecodeInsert checks that
// what the fast decoders accept, checkBody and decode accept alike;
// FuzzDecodeInsertRefusals that what the standard strict path refuses,
// decodeInsert refuses.
func decodeInsert(body []byte, b *insertBody) error {
	if decodeInsertPlain(body, b) {
		return nil
	}
	*b = insertBody{}
	if err := checkBody(body, insertField); err != nil {
		return err
	}
	if decodeInsertSegment(body, b) {
		return nil
	}
	*b = insertBody{}
	return decode(body, b)
}

// decodeInsertSegment decodes body with segmentio's decoder; false means
// it did not accept the body (b may then hold part of it).
func decodeInsertSegment(body []byte, b *insertBody) bool {
	rest, err := sjson.Parse(body, b, sjson.DisallowUnknownFields)
	return err == nil && len(bytes.TrimLeft(rest, " \t\r\n")) == 0
}

// insertFields are the keys of insertBody, in the order of
// plainInsert.strs (monitored_domain_id apart).
var insertFields = [...]string{"tool_code", "resource_url", "username", "password", "hash", "hash_algorithm"}

// plainInsert holds the values decodeInsertPlain points insertBody at:
// one allocation.
type plainInsert struct {
	domain int64
	strs   [len(insertFields)]string
}

// decodeInsertPlain decodes the common body in one pass: one flat object
// of insertBody's keys, each once and spelled exactly, string values
// without escapes, control characters or invalid UTF-8, and
// monitored_domain_id a plain non-negative integer of at most 18 digits;
// any value may be null. Anything else returns false (b may then hold
// part of the body) for the general decoders, which read those bodies
// alike (FuzzDecodeInsert).
func decodeInsertPlain(body []byte, b *insertBody) bool {
	i := 0
	ws := func() {
		for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
			i++
		}
	}
	// str reads a string without escapes, returning its bounds.
	str := func() (int, int, bool) {
		if i >= len(body) || body[i] != '"' {
			return 0, 0, false
		}
		start := i + 1
		for j := start; j < len(body); j++ {
			switch c := body[j]; {
			case c == '"':
				i = j + 1
				return start, j, true
			case c == '\\' || c < 0x20:
				return 0, 0, false
			}
		}
		return 0, 0, false
	}
	isNull := func() bool {
		if len(body)-i >= 4 && string(body[i:i+4]) == "null" {
			i += 4
			return true
		}
		return false
	}
	ws()
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i++
	ws()
	var v *plainInsert
	var seen uint
	// The strings are substrings of one copy of the body.
	var all string
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			ks, ke, ok := str()
			if !ok {
				return false
			}
			key := body[ks:ke]
			ws()
			if i >= len(body) || body[i] != ':' {
				return false
			}
			i++
			ws()
			if v == nil {
				v = new(plainInsert)
			}
			if string(key) == "monitored_domain_id" {
				if seen&1 != 0 {
					return false
				}
				seen |= 1
				if !isNull() {
					start := i
					for i < len(body) && body[i] >= '0' && body[i] <= '9' {
						i++
					}
					n := i - start
					if n == 0 || n > 18 || (n > 1 && body[start] == '0') {
						return false
					}
					for _, c := range body[start:i] {
						v.domain = v.domain*10 + int64(c-'0')
					}
					b.MonitoredDomainID = &v.domain
				}
			} else {
				f := -1
				for k, name := range insertFields {
					if string(key) == name {
						f = k
						break
					}
				}
				if f < 0 || seen&(2<<f) != 0 {
					return false
				}
				seen |= 2 << f
				if !isNull() {
					vs, ve, ok := str()
					if !ok || !utf8.Valid(body[vs:ve]) {
						return false
					}
					if all == "" {
						all = string(body)
					}
					v.strs[f] = all[vs:ve]
					*b.field(f) = &v.strs[f]
				}
			}
			ws()
			if i < len(body) && body[i] == ',' {
				i++
				ws()
				continue
			}
			if i < len(body) && body[i] == '}' {
				i++
				break
			}
			return false
		}
	}
	ws()
	return i == len(body)
}

// field returns the field of b named insertFields[f].
func (b *insertBody) field(f int) **string {
	switch f {
	case 0:
		return &b.ToolCode
	case 1:
		return &b.ResourceURL
	case 2:
		return &b.Username
	case 3:
		return &b.Password
	case 4:
		return &b.Hash
	}
	return &b.HashAlgorithm
}

// decodeError names the field of a decoding error when there is one.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return invalid(te.Field, "must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	// encoding/json has no typed error for unknown fields.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return &FieldError{Code: "UNKNOWN_FIELD", Field: name, Reason: "is not a field of this request"}
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the body is empty")
	}
	return fmt.Errorf("the body is not a JSON object: %w", err)
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "number (integer)"
	case goKind == "string":
		return "string"
	}
	return goKind
}

// checkText checks a required or optional text field.
func checkText(field string, v *string, required bool, limit int) (string, error) {
	if v == nil {
		if required {
			return "", missing(field)
		}
		return "", nil
	}
	s := *v
	switch {
	case s == "" && required:
		return "", invalid(field, "must not be empty")
	case len(s) > limit:
		return "", invalid(field, "is longer than %d bytes", limit)
	case !utf8.ValidString(s):
		return "", invalid(field, "is not valid UTF-8")
	case strings.ContainsFunc(s, unsafeRune):
		return "", invalid(field, "contains control or format characters")
	}
	return s, nil
}

// unsafeRune reports the runes a text field refuses: control characters,
// and Unicode format characters (category Cf: bidirectional overrides and
// isolates, zero-width spaces and joiners, the byte order mark…), which
// change how a row reads without showing themselves.
func unsafeRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// toFinding validates an insert body into a finding without uid, tenant,
// times or state.
func (b *insertBody) toFinding() (store.Finding, error) {
	var f store.Finding
	if b.MonitoredDomainID == nil {
		return f, missing("monitored_domain_id")
	}
	if *b.MonitoredDomainID < 1 {
		return f, invalid("monitored_domain_id", "must be a positive integer")
	}
	f.MonitoredDomainID = *b.MonitoredDomainID
	var err error
	if f.ToolCode, err = checkText("tool_code", b.ToolCode, true, maxShort); err != nil {
		return f, err
	}
	raw, err := checkText("resource_url", b.ResourceURL, true, maxLong)
	if err != nil {
		return f, err
	}
	if f.ResourceURL, err = NormalizeResource(raw); err != nil {
		return f, invalid("resource_url", "%v", err)
	}
	if f.Username, err = checkText("username", b.Username, true, maxMedium); err != nil {
		return f, err
	}
	if b.Password == nil && b.Hash == nil {
		return f, &FieldError{Code: "MISSING_FIELD", Field: "password", Reason: "is required when there is no hash"}
	}
	if f.Password, err = checkText("password", b.Password, false, maxLong); err != nil {
		return f, err
	}
	if f.Hash, err = checkText("hash", b.Hash, false, maxMedium); err != nil {
		return f, err
	}
	if f.HashAlgorithm, err = checkText("hash_algorithm", b.HashAlgorithm, f.Hash != "", maxShort); err != nil {
		return f, err
	}
	if strings.HasPrefix(f.Password, sealedPrefix) {
		return f, invalid("password", "must not start with %q (the prefix of encrypted stored passwords)", sealedPrefix)
	}
	if f.Password == "" && f.Hash == "" {
		return f, invalid("password", "password and hash are both empty")
	}
	if f.Hash == "" && f.HashAlgorithm != "" {
		return f, invalid("hash_algorithm", "is set but there is no hash")
	}
	return f, nil
}

// NormalizeResource returns the normalized form of a resource URL: an
// absolute URL with a host, its scheme and host in lower case, without
// fragment or user info, its path ending with a slash (query kept).
func NormalizeResource(raw string) (string, error) {
	if plainResource(raw) {
		// Already normalized but maybe for the final slash: what the
		// general path below returns (FuzzNormalizeResource).
		if strings.HasSuffix(raw, "/") {
			return raw, nil
		}
		return raw + "/", nil
	}
	return normalizeURL(raw)
}

// normalizeURL is NormalizeResource's general path.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a URL")
	}
	if u.Scheme == "" || u.Host == "" {
		return "", errors.New("must be an absolute URL with a host, e.g. https://example.com/login")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	u.ForceQuery = false
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u.String(), nil
}

// plainResource reports whether raw is a URL of the common form that
// NormalizeResource leaves as it is (but for a final slash): "http://" or
// "https://", a host of lower-case letters, digits, dots and dashes with
// an optional port of digits, then a path of unreserved characters and
// slashes, without user info, query or fragment.
func plainResource(raw string) bool {
	rest, ok := strings.CutPrefix(raw, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(raw, "http://"); !ok {
			return false
		}
	}
	i := 0
	for i < len(rest) && ('a' <= rest[i] && rest[i] <= 'z' || '0' <= rest[i] && rest[i] <= '9' || rest[i] == '.' || rest[i] == '-') {
		i++
	}
	if i == 0 {
		return false
	}
	if i < len(rest) && rest[i] == ':' {
		i++
		start := i
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i == len(rest) {
		return true
	}
	if rest[i] != '/' {
		return false
	}
	for ; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
			return false
		}
	}
	return true
}

// decodePatch decodes a PATCH body: state (one of States), ticket,
// priority (one of Priorities), severity (one of Severities); null clears
// ticket, priority and severity. At least one field is required.
func decodePatch(body []byte) (store.PatchFinding, error) {
	var p store.PatchFinding
	var m map[string]json.RawMessage
	if err := checkBody(body, patchField); err != nil {
		return p, err
	}
	if err := decodeStrict(body, &m); err != nil {
		return p, err
	}
	if m == nil {
		return p, errors.New("the body must be a JSON object")
	}
	if len(m) == 0 {
		return p, &FieldError{Code: "MISSING_FIELD", Field: "state", Reason: "a patch needs at least one of state, ticket, priority, severity"}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		raw := m[k]
		var dst **string
		var allowed []string
		nullable, limit := true, maxShort
		switch k {
		case "state":
			dst, allowed, nullable = &p.State, States, false
		case "ticket":
			dst = &p.Ticket
		case "priority":
			dst, allowed = &p.Priority, Priorities
		case "severity":
			dst, allowed = &p.Severity, Severities
		default:
			return p, &FieldError{Code: "UNKNOWN_FIELD", Field: k, Reason: "is not a field of this request"}
		}
		if string(raw) == "null" {
			if !nullable {
				return p, invalid(k, "cannot be null")
			}
			*dst = new("")
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, invalid(k, "must be a string or null")
		}
		v, err := checkText(k, &s, true, limit)
		if err != nil {
			return p, err
		}
		if allowed != nil && !slices.Contains(allowed, v) {
			return p, invalid(k, "must be one of %s", strings.Join(allowed, ", "))
		}
		*dst = &v
	}
	return p, nil
}

// named is the {name, id} object of tool, organization and
// monitored_domain. The ids of tools and organizations are the cluster's
// (store.Finding.ToolID, OrgID: docs/decisions.md decision 63), null only
// while a master of the cluster runs a release without them.
type named struct {
	Name string `json:"name"`
	ID   *int64 `json:"id"`
}

// hostname is the hostname object.
type hostname struct {
	Data string  `json:"data"`
	UID  *string `json:"uid"`
}

// View is a finding as the API answers it (the spec's table).
type View struct {
	UID             string   `json:"uid"`
	Identifier      string   `json:"identifier"`
	FindingType     string   `json:"finding_type"`
	Tool            named    `json:"tool"`
	Organization    named    `json:"organization"`
	MonitoredDomain named    `json:"monitored_domain"`
	Hostname        hostname `json:"hostname"`
	IPv4Address     *string  `json:"ipv4_address"`
	Port            *int     `json:"port"`
	Severity        *string  `json:"severity"`
	DiscoveryDate   int64    `json:"discovery_date"`
	Ticket          *string  `json:"ticket"`
	Priority        *string  `json:"priority"`
	State           string   `json:"state"`
	Username        string   `json:"username"`
	PlainText       string   `json:"plain_text"`
	HashAlgorithm   string   `json:"hash_algorithm"`
	Hash            string   `json:"hash"`
	// EmailAddress is a String in the spec: "" when the username is
	// not an e-mail address.
	EmailAddress string `json:"email_address"`
	Resource     string `json:"resource"`
}

// DomainName is the name of monitored domain id: there is no registry of
// monitored domains, so it is derived from the id.
func DomainName(id int64) string { return fmt.Sprintf("domain-%d", id) }

// ViewOf returns the API form of a stored finding.
func ViewOf(f store.Finding) View {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	host := ""
	if u, err := url.Parse(f.ResourceURL); err == nil {
		host = u.Hostname()
	}
	id := f.MonitoredDomainID
	idOf := func(id int64) *int64 {
		if id <= 0 {
			return nil
		}
		return &id
	}
	return View{
		UID:             f.UID,
		Identifier:      f.UID,
		FindingType:     FindingType,
		Tool:            named{Name: f.ToolCode, ID: idOf(f.ToolID)},
		Organization:    named{Name: f.Tenant, ID: idOf(f.OrgID)},
		MonitoredDomain: named{Name: DomainName(id), ID: &id},
		Hostname:        hostname{Data: host},
		Severity:        opt(f.Severity),
		DiscoveryDate:   f.DiscoveredMS / 1000,
		Ticket:          opt(f.Ticket),
		Priority:        opt(f.Priority),
		State:           f.State,
		Username:        f.Username,
		PlainText:       f.Password,
		HashAlgorithm:   f.HashAlgorithm,
		Hash:            f.Hash,
		EmailAddress:    emailOf(f.Username),
		Resource:        f.ResourceURL,
	}
}

// emailOf returns username when it is a plain e-mail address
// (local@domain, no display name), else "".
func emailOf(username string) string {
	a, err := mail.ParseAddress(username)
	if err != nil || a.Name != "" || a.Address != username {
		return ""
	}
	return username
}
