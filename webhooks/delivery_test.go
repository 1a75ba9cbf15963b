package webhooks

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// hookWith returns a webhook file with extra members added.
func hookWith(extra string) string {
	return `{"id": "h", "token": "a-long-test-token", ` + extra + `, "collector_config": {"event_type": "e", "payload": {}}}`
}

func TestParse_Delivery(t *testing.T) {
	t.Parallel()
	w := mustParse(t, hookWith(`"dedupe": {"header": "webhook-id", "window": "1h"},
		"rate_limit": {"rate": 2.5, "burst": 10, "per_client": true},
		"allow_ips": ["192.0.2.0/24", "2001:db8::/32", "198.51.100.7", "::ffff:203.0.113.9"]`))
	if d := w.Dedupe; d == nil || d.Header != "Webhook-Id" || d.JMESPath != "" || d.Window != time.Hour {
		t.Errorf("dedupe = %+v", d)
	}
	if l := w.RateLimit; l == nil || *l != (RateLimit{Rate: 2.5, Burst: 10, PerClient: true}) {
		t.Errorf("rate_limit = %+v", l)
	}
	want := []string{"192.0.2.0/24", "2001:db8::/32", "198.51.100.7/32", "203.0.113.9/32"}
	if len(w.AllowIPs) != len(want) {
		t.Fatalf("allow_ips = %v", w.AllowIPs)
	}
	for i, p := range w.AllowIPs {
		if p.String() != want[i] {
			t.Errorf("allow_ips[%d] = %s, want %s", i, p, want[i])
		}
	}
	if got := w.String(); !strings.Contains(got, "dedupe=header Webhook-Id window 1h0m0s") || !strings.Contains(got, "rate_limit=rate 2.5/s burst 10 per client") {
		t.Errorf("String() = %s", got)
	}
	if err := w.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	// Defaults: a 24 h window, a burst of the rate rounded up.
	w = mustParse(t, hookWith(`"dedupe": {"jmespath": "data.id"}, "rate_limit": {"rate": 0.5}`))
	if w.Dedupe.Window != DefaultDedupeWindow || w.Dedupe.JMESPath != "data.id" || w.RateLimit.Burst != 1 || w.RateLimit.PerClient {
		t.Errorf("defaults: %+v %+v", w.Dedupe, w.RateLimit)
	}
	if w = mustParse(t, hookWith(`"rate_limit": {"rate": 7.2}`)); w.RateLimit.Burst != 8 {
		t.Errorf("burst = %d, want 8", w.RateLimit.Burst)
	}
	// Without the settings: nothing.
	w = mustParse(t, hookWith(`"tenant_id": "x"`))
	if w.Dedupe != nil || w.RateLimit != nil || w.AllowIPs != nil {
		t.Errorf("unset settings: %+v", w)
	}
}

// TestParse_DedupeSignedID: with a scheme that signs the message id, a
// dedupe header names that id (either family's name means the verified
// id) and no other header may be the key.
func TestParse_DedupeSignedID(t *testing.T) {
	t.Parallel()
	const std = `"signature": {"scheme": "standard-webhooks", "secret": "whsec_YWJj"}, `
	for _, header := range []string{"webhook-id", "Svix-Id"} {
		w := mustParse(t, hookWith(std+`"dedupe": {"header": "`+header+`"}`))
		if !w.Dedupe.SignedID || !strings.Contains(w.String(), "dedupe=signed message id") {
			t.Errorf("%s: SignedID %v, String() %s", header, w.Dedupe.SignedID, w)
		}
		if err := w.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", header, err)
		}
		w.Dedupe.SignedID = false
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "dedupe.header") {
			t.Errorf("%s: Validate without SignedID: %v", header, err)
		}
	}
	if _, err := Parse(strings.NewReader(hookWith(std + `"dedupe": {"header": "X-Request-Id"}`))); err == nil ||
		!strings.Contains(err.Error(), `dedupe.header "X-Request-Id": the standard-webhooks signature covers the message id`) {
		t.Errorf("an unsigned dedupe header: %v", err)
	}
	// A body expression (the body is signed), and schemes that sign no id.
	if w := mustParse(t, hookWith(std+`"dedupe": {"jmespath": "id"}`)); w.Dedupe.SignedID {
		t.Error("jmespath keyed on the signed id")
	}
	w := mustParse(t, hookWith(`"signature": {"scheme": "github", "secret": "s"}, "dedupe": {"header": "X-GitHub-Delivery"}`))
	if w.Dedupe.SignedID {
		t.Error("github keyed on a signed id")
	}
	w.Dedupe.SignedID = true
	if err := w.Validate(); err == nil {
		t.Error("Validate accepted SignedID with a scheme that signs no id")
	}
}

func TestParse_DeliveryBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, extra, want string
	}{
		{"dedupe not object", `"dedupe": "webhook-id"`, "dedupe: must be a JSON object"},
		{"dedupe neither", `"dedupe": {"window": "1h"}`, `dedupe: set "header" or "jmespath"`},
		{"dedupe both", `"dedupe": {"header": "a", "jmespath": "b"}`, `not both`},
		{"dedupe unknown", `"dedupe": {"heder": "a"}`, "dedupe.heder: unknown field"},
		{"dedupe bad header", `"dedupe": {"header": "a b"}`, `dedupe.header "a b": must be an HTTP header name`},
		{"dedupe bad jmespath", `"dedupe": {"jmespath": "a[("}`, `dedupe.jmespath "a[(": invalid JMESPath expression`},
		{"dedupe bad window", `"dedupe": {"header": "a", "window": "soon"}`, `dedupe.window "soon": must be a duration`},
		{"dedupe short window", `"dedupe": {"header": "a", "window": "10ms"}`, `dedupe.window "10ms"`},
		{"dedupe long window", `"dedupe": {"header": "a", "window": "8760h"}`, `dedupe.window "8760h"`},
		{"dedupe window number", `"dedupe": {"header": "a", "window": 60}`, `dedupe.window: must be a string`},
		{"rate missing", `"rate_limit": {"burst": 3}`, "rate_limit.rate: required"},
		{"rate zero", `"rate_limit": {"rate": 0}`, `rate_limit.rate "0": must be a number`},
		{"rate negative", `"rate_limit": {"rate": -1}`, `rate_limit.rate "-1"`},
		{"rate string", `"rate_limit": {"rate": "10/s"}`, `rate_limit.rate`},
		{"rate huge", `"rate_limit": {"rate": 1e9}`, `rate_limit.rate "1e9"`},
		{"burst zero", `"rate_limit": {"rate": 1, "burst": 0}`, `rate_limit.burst "0": must be a whole number`},
		{"burst fraction", `"rate_limit": {"rate": 1, "burst": 1.5}`, `rate_limit.burst "1.5"`},
		{"per_client string", `"rate_limit": {"rate": 1, "per_client": "yes"}`, `rate_limit.per_client "\"yes\"": must be true or false`},
		{"rate unknown", `"rate_limit": {"rate": 1, "period": "1s"}`, "rate_limit.period: unknown field"},
		{"allow_ips string", `"allow_ips": "10.0.0.0/8"`, "allow_ips: must be a list of strings"},
		{"allow_ips empty", `"allow_ips": []`, "allow_ips: must not be empty"},
		{"allow_ips bad", `"allow_ips": ["10.0.0.0/8", "ten"]`, `allow_ips[1] "ten": not an IP address or CIDR prefix`},
		{"allow_ips host bits", `"allow_ips": ["10.1.2.3/8"]`, `allow_ips[0] "10.1.2.3/8": host bits set (did you mean 10.0.0.0/8?)`},
		{"allow_ips zone", `"allow_ips": ["fe80::1%eth0"]`, `not an IP address`},
		{"allow_ips mapped", `"allow_ips": ["::ffff:10.0.0.0/104"]`, `write an IPv4-mapped prefix as IPv4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(hookWith(tt.extra)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("not a *ValidationError: %T", err)
			}
		})
	}
}

func TestWebhook_ValidateDelivery(t *testing.T) {
	t.Parallel()
	w := mustParse(t, hookWith(`"dedupe": {"header": "webhook-id"}, "rate_limit": {"rate": 1}, "allow_ips": ["10.0.0.0/8"]`))
	w.Dedupe.Window = time.Millisecond
	w.RateLimit.Burst = 0
	w.AllowIPs = append(w.AllowIPs, netip.MustParsePrefix("10.1.2.3/8"))
	err := w.Validate()
	for _, want := range []string{`dedupe.window "1ms"`, `rate_limit.burst "0"`, `allow_ips[1] "10.1.2.3/8"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}

func TestDedupe_Key(t *testing.T) {
	t.Parallel()
	header := mustParse(t, hookWith(`"dedupe": {"header": "Webhook-Id"}`)).Dedupe
	body := mustParse(t, hookWith(`"dedupe": {"jmespath": "data.id"}`)).Dedupe
	long := strings.Repeat("x", MaxDeliveryIDLen+1)
	tests := []struct {
		name    string
		d       *Dedupe
		header  string
		body    string
		want    string
		wantErr error
	}{
		{"header", header, " msg_1 ", "", "msg_1", nil},
		{"header missing", header, "", "{}", "", ErrNoDeliveryID},
		{"header too long", header, long, "", "", ErrBadDeliveryID},
		{"body string", body, "ignored", `{"data": {"id": "evt_9"}}`, "evt_9", nil},
		{"body number", body, "", `{"data": {"id": 12345678901234567890}}`, "12345678901234567890", nil},
		{"body missing", body, "", `{"data": {}}`, "", ErrNoDeliveryID},
		{"body empty string", body, "", `{"data": {"id": ""}}`, "", ErrNoDeliveryID},
		{"body object", body, "", `{"data": {"id": {"a": 1}}}`, "", ErrBadDeliveryID},
		{"body not json", body, "", `{"data"`, "", ErrBodyNotJSON},
		{"body too long", body, "", `{"data": {"id": "` + long + `"}}`, "", ErrBadDeliveryID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.d.Key(tt.header, []byte(tt.body))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Key = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWebhook_Allows(t *testing.T) {
	t.Parallel()
	open := mustParse(t, hookWith(`"tenant_id": "x"`))
	w := mustParse(t, hookWith(`"allow_ips": ["192.0.2.0/24", "2001:db8::/32"]`))
	tests := []struct {
		addr       string
		open, want bool
	}{
		{"192.0.2.200", true, true},
		{"::ffff:192.0.2.1", true, true},
		{"192.0.3.1", true, false},
		{"2001:db8::1", true, true},
		{"2001:db9::1", true, false},
		{"127.0.0.1", true, false},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		if got := open.Allows(a); got != tt.open {
			t.Errorf("no allow_ips: Allows(%s) = %t", a, got)
		}
		if got := w.Allows(a); got != tt.want {
			t.Errorf("Allows(%s) = %t, want %t", a, got, tt.want)
		}
	}
	if w.Allows(netip.Addr{}) {
		t.Error("the zero address is allowed")
	}
}
