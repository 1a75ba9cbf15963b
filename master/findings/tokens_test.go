package findings

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/squallhq/squall/master/auth"
)

// countingVerifier counts the checks that reach the real verifier.
type countingVerifier struct {
	v     *auth.Verifier
	calls int
}

func (c *countingVerifier) Verify(header string) (*auth.Claims, error) {
	c.calls++
	return c.v.Verify(header)
}

func TestTokenCache(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	signer := &auth.Signer{PrivateKey: priv, Now: func() time.Time { return clock }}
	real := &countingVerifier{v: &auth.Verifier{PublicKey: pub, Now: func() time.Time { return clock }}}
	c := newTokenCache(real)
	c.now = func() time.Time { return clock }
	sign := func(tenant string, ttl time.Duration) string {
		tok, err := signer.Sign(auth.Claims{User: "u", Tenant: tenant}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	check := func(header, wantTenant string, wantCalls int) {
		t.Helper()
		claims, err := c.Verify(header)
		if wantTenant == "" {
			if err == nil {
				t.Fatalf("accepted: %+v", claims)
			}
		} else if err != nil || claims.Tenant != wantTenant {
			t.Fatalf("claims %+v, %v", claims, err)
		}
		if real.calls != wantCalls {
			t.Fatalf("%d checks reached the verifier, want %d", real.calls, wantCalls)
		}
	}

	a := sign("a", time.Hour)
	check(a, "a", 1)
	check(a, "a", 1) // cached
	b := sign("b", time.Hour)
	check(b, "b", 2) // another token is its own entry
	check(a, "a", 2)

	// After tokenTTL the signature is checked again.
	clock = clock.Add(tokenTTL + time.Second)
	check(a, "a", 3)

	// Never past the token's exp: a token expiring in 10 s is checked
	// again, and refused, once it has expired.
	short := sign("s", 10*time.Second)
	check(short, "s", 4)
	check(short, "s", 4)
	clock = clock.Add(11 * time.Second)
	check(short, "", 5)

	// Failures are not cached.
	bad := a[:len(a)-4] + "AAAA"
	check(bad, "", 6)
	check(bad, "", 7)

	// Unsigned tokens (no exp) are not cached.
	uv := &countingVerifier{v: &auth.Verifier{AllowUnsigned: true}}
	uc := newTokenCache(uv)
	unsigned := "Bearer " + auth.EncodeUnsigned(auth.Claims{User: "u", Tenant: "x"})
	for range 2 {
		if claims, err := uc.Verify(unsigned); err != nil || claims.Tenant != "x" {
			t.Fatalf("unsigned: %+v %v", claims, err)
		}
	}
	if uv.calls != 2 {
		t.Fatalf("unsigned token checked %d times, want 2", uv.calls)
	}
	if !errors.Is(func() error { _, err := c.Verify("Basic x"); return err }(), auth.ErrUnauthenticated) {
		t.Fatal("a malformed header is not ErrUnauthenticated")
	}
}
