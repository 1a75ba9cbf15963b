package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var claims = Claims{User: "alice", Tenant: "acme", Auths: map[string]Authorization{
	"m":   {Path: []string{"root", "master"}, Roles: []string{"view", "edit"}},
	"all": {Path: []string{"root"}, Roles: []string{"admin"}},
	"v":   {Path: []string{"root", "master"}, Roles: []string{"view"}},
	"t":   {Path: []string{"root"}, Roles: []string{"test_event_execute_actions"}},
	"bad": {Path: []string{"master"}, Roles: []string{"admin"}},
}}

func TestVerifier_Verify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	hmacKey := []byte("0123456789abcdef0123456789abcdef")
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hs := &Signer{HMACKey: hmacKey, Now: clock}
	ed := &Signer{PrivateKey: priv, Now: clock}
	mint := func(s *Signer, c Claims, ttl time.Duration) string {
		tok, err := s.Sign(c, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	noneTok, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwtClaims{Claims: claims, RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// Algorithm confusion: an HS256 token whose key is the Ed25519 public key.
	confused, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwtClaims{Claims: claims, RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}).SignedString([]byte(pub))
	if err != nil {
		t.Fatal(err)
	}
	noExp, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwtClaims{Claims: claims}).SignedString(hmacKey)
	if err != nil {
		t.Fatal(err)
	}
	good := mint(hs, claims, time.Hour)
	tampered := good[:len(good)-2] + "xx"
	hsVerifier := &Verifier{HMACKey: hmacKey, Now: clock}
	edVerifier := &Verifier{PublicKey: pub, Now: clock}
	devVerifier := &Verifier{AllowUnsigned: true, HMACKey: hmacKey, Now: clock}
	tests := []struct {
		name   string
		v      *Verifier
		header string
		ok     bool
		reason string
	}{
		{"HS256", hsVerifier, "Bearer " + good, true, ""},
		{"scheme is case-insensitive", hsVerifier, "bearer " + good, true, ""},
		{"EdDSA", edVerifier, "Bearer " + mint(ed, claims, time.Hour), true, ""},
		{"unsigned in dev", devVerifier, "Bearer " + EncodeUnsigned(claims), true, ""},
		{"signed in dev", devVerifier, "Bearer " + good, true, ""},
		{"unsigned refused by default", hsVerifier, "Bearer " + EncodeUnsigned(claims), false, "only signed tokens"},
		{"expired", hsVerifier, "Bearer " + mint(&Signer{HMACKey: hmacKey, Now: func() time.Time { return now.Add(-2 * time.Hour) }}, claims, time.Hour), false, "expired"},
		{"no exp", hsVerifier, "Bearer " + noExp, false, "exp"},
		{"alg none", hsVerifier, "Bearer " + noneTok, false, "signing method"},
		{"alg none in dev", devVerifier, "Bearer " + noneTok, false, "signing method"},
		{"algorithm confusion", edVerifier, "Bearer " + confused, false, "signing method"},
		{"EdDSA token on an HS256 verifier", hsVerifier, "Bearer " + mint(ed, claims, time.Hour), false, "signing method"},
		{"tampered", hsVerifier, "Bearer " + tampered, false, "signature"},
		{"no key", &Verifier{}, "Bearer " + good, false, "no key"},
		{"empty user", devVerifier, "Bearer " + EncodeUnsigned(Claims{Auths: claims.Auths}), false, "user is empty"},
		{"empty user signed", hsVerifier, "Bearer " + func() string {
			tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwtClaims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}).SignedString(hmacKey)
			return tok
		}(), false, "user is empty"},
		{"not base64", devVerifier, "Bearer !!!", false, "neither"},
		{"base64 of garbage", devVerifier, "Bearer " + base64.StdEncoding.EncodeToString([]byte("{")), false, "JSON"},
		{"missing header", hsVerifier, "", false, "Bearer"},
		{"basic auth", hsVerifier, "Basic YTpi", false, "Bearer"},
		{"oversized", devVerifier, "Bearer " + strings.Repeat("A", maxToken+4), false, "oversized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := tc.v.Verify(tc.header)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if c.User != "alice" || c.Tenant != "acme" || len(c.Auths) != len(claims.Auths) {
					t.Errorf("claims %+v", c)
				}
				return
			}
			if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %v, want ErrUnauthenticated mentioning %q", err, tc.reason)
			}
		})
	}
}

func TestSigner_errors(t *testing.T) {
	t.Parallel()
	if _, err := (&Signer{HMACKey: []byte("k")}).Sign(Claims{}, time.Hour); err == nil {
		t.Error("signed an empty user")
	}
	if _, err := (&Signer{HMACKey: []byte("k")}).Sign(claims, 0); err == nil {
		t.Error("signed a token without lifetime")
	}
	if _, err := (&Signer{}).Sign(claims, time.Hour); err == nil {
		t.Error("signed without a key")
	}
}

func TestClaims_Scope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		auth string
		perm Permission
		ok   bool
	}{
		{"m", View, true},
		{"m", Edit, true},
		{"m", ExecuteTestActions, false},
		{"v", View, true},
		{"v", Edit, false},
		{"all", Edit, true},
		{"all", ExecuteTestActions, true},
		{"t", ExecuteTestActions, true},
		{"t", View, false},
		{"bad", View, false},
		{"unknown", View, false},
	}
	for _, tc := range tests {
		s, err := claims.Scope(tc.auth, tc.perm)
		if (err == nil) != tc.ok {
			t.Errorf("Scope(%s, %s) err = %v, want ok=%v", tc.auth, tc.perm, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrForbidden) {
			t.Errorf("Scope(%s, %s) err = %v, want ErrForbidden", tc.auth, tc.perm, err)
		}
		if err == nil && (s.User != "alice" || s.Name != tc.auth) {
			t.Errorf("scope %+v", s)
		}
	}
}

func TestClaims_FindingsTenant(t *testing.T) {
	t.Parallel()
	path := func(p ...string) Authorization { return Authorization{Path: p, Roles: []string{"view"}} }
	for _, tc := range []struct {
		name   string
		claims Claims
		want   string // "" means none
	}{
		{"claim", Claims{Tenant: "acme", Auths: map[string]Authorization{"all": path("root")}}, "acme"},
		{"one path", Claims{Auths: map[string]Authorization{"a": path("root", "acme")}}, "acme"},
		{"paths below one tenant", Claims{Auths: map[string]Authorization{"a": path("root", "acme"), "b": path("root", "acme", "rs")}}, "acme"},
		{"two tenants", Claims{Auths: map[string]Authorization{"a": path("root", "acme"), "b": path("root", "beta")}}, ""},
		{"the root", Claims{Auths: map[string]Authorization{"a": path("root")}}, ""},
		{"the root and a tenant", Claims{Auths: map[string]Authorization{"a": path("root"), "b": path("root", "acme")}}, ""},
		{"not from root", Claims{Auths: map[string]Authorization{"a": path("other", "acme")}}, ""},
		{"nothing", Claims{}, ""},
	} {
		got, ok := tc.claims.FindingsTenant()
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.name, got, ok, tc.want)
		}
	}
}

func TestScope_Resolve(t *testing.T) {
	t.Parallel()
	s, err := claims.Scope("m", View)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string // "" = forbidden
	}{
		{"", "root,master"},
		{"master", "root,master"},
		{"master,emails,archive", "root,master,emails,archive"},
		{"root,master", ""},
		{"other", ""},
		{"master,..,x", ""},
		{"master,,x", ""},
		{"master,a.b", ""},
		{"master,a/b", ""},
		{"master,%2e%2e", ""},
		{"master, x", ""},
	}
	for _, tc := range tests {
		got, err := s.Resolve(tc.in)
		if tc.want == "" {
			if !errors.Is(err, ErrForbidden) {
				t.Errorf("Resolve(%q) = %v, %v; want ErrForbidden", tc.in, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("Resolve(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// Resolve must not share the token's path.
	p, _ := s.Resolve("master,x")
	p[0] = "changed"
	if claims.Auths["m"].Path[0] != "root" {
		t.Error("Resolve modified the token's path")
	}
}

// TestAuthorization_Grants: fleet_report grants only itself; admin grants
// it; edit implies view and the findings roles, view implies
// findings_read; the findings roles imply nothing else.
func TestAuthorization_Grants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		roles []string
		p     Permission
		want  bool
	}{
		{[]string{"fleet_report"}, FleetReport, true},
		{[]string{"fleet_report"}, View, false},
		{[]string{"fleet_report"}, Edit, false},
		{[]string{"view"}, FleetReport, false},
		{[]string{"edit"}, FleetReport, false},
		{[]string{"edit"}, View, true},
		{[]string{"admin"}, FleetReport, true},
		{[]string{"view", "fleet_report"}, View, true},
		{[]string{"view"}, FindingsRead, true},
		{[]string{"view"}, FindingsWrite, false},
		{[]string{"edit"}, FindingsRead, true},
		{[]string{"edit"}, FindingsWrite, true},
		{[]string{"admin"}, FindingsWrite, true},
		{[]string{"findings_read"}, FindingsRead, true},
		{[]string{"findings_read"}, FindingsWrite, false},
		{[]string{"findings_read"}, View, false},
		{[]string{"findings_write"}, FindingsWrite, true},
		{[]string{"findings_write"}, FindingsRead, false},
		{[]string{"findings_write"}, Edit, false},
		{[]string{"fleet_report"}, FindingsRead, false},
		// Dead letters hold every tenant's events: only their own roles
		// and admin grant them.
		{[]string{"admin"}, DeadLettersReplay, true},
		{[]string{"deadletters_replay"}, DeadLettersRead, true},
		{[]string{"deadletters_read"}, DeadLettersReplay, false},
		{[]string{"deadletters_replay"}, View, false},
		{[]string{"view", "edit", "findings_read"}, DeadLettersRead, false},
	} {
		if got := (Authorization{Path: []string{"root"}, Roles: tc.roles}).Grants(tc.p); got != tc.want {
			t.Errorf("%v grants %s: %v, want %v", tc.roles, tc.p, got, tc.want)
		}
	}
}

// TestClaims_FindingsAllowed: the role must be on an authorization whose
// path is [root] or [root, tenant, ...]; the error names the missing role.
func TestClaims_FindingsAllowed(t *testing.T) {
	t.Parallel()
	auth := func(roles ...string) func(path ...string) Claims {
		return func(path ...string) Claims {
			return Claims{User: "u", Auths: map[string]Authorization{"x": {Path: path, Roles: roles}}}
		}
	}
	for _, tc := range []struct {
		name   string
		claims Claims
		p      Permission
		want   bool
	}{
		{"no roles", auth()("root", "acme"), FindingsRead, false},
		{"view on the tenant", auth("view")("root", "acme"), FindingsRead, true},
		{"view below the tenant", auth("view")("root", "acme", "web"), FindingsRead, true},
		{"view on root", auth("view")("root"), FindingsRead, true},
		{"view on another tenant", auth("view")("root", "other"), FindingsRead, false},
		{"view does not write", auth("view")("root", "acme"), FindingsWrite, false},
		{"edit writes", auth("edit")("root", "acme"), FindingsWrite, true},
		{"findings_write", auth("findings_write")("root", "acme"), FindingsWrite, true},
		{"findings_write does not read", auth("findings_write")("root", "acme"), FindingsRead, false},
		{"findings_read", auth("findings_read")("root", "acme"), FindingsRead, true},
		{"a path outside root", auth("admin")("acme"), FindingsRead, false},
		{"no authorization", Claims{User: "u", Tenant: "acme"}, FindingsRead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.claims.FindingsAllowed("acme", tc.p)
			if (err == nil) != tc.want {
				t.Fatalf("FindingsAllowed(acme, %s) = %v, want allowed %v", tc.p, err, tc.want)
			}
			if err != nil && (!errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), string(tc.p))) {
				t.Errorf("error %q: want ErrForbidden naming %s", err, tc.p)
			}
		})
	}
}
