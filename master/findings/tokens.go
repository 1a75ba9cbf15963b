package findings

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/master/auth"
)

// Bounds of the verified-token cache.
const (
	// tokenTTL is how long a verified token is taken without checking its
	// signature again (never past its exp).
	tokenTTL = time.Minute
	// maxCachedTokens bounds the cache; when it is full it starts over.
	maxCachedTokens = 4096
)

// tokenCache remembers the claims of verified Authorization headers, so
// that an integration sending many requests with one token pays for one
// signature check (and JWT parse) a minute instead of one per request. An
// entry is keyed by the SHA-256 of the whole header (the token itself is
// not kept) and never outlives the token's exp; only signed tokens with an
// exp are cached, failures never. Tokens cannot be revoked before their
// exp, so serving a verified token from the cache grants nothing that
// checking it again would refuse.
type tokenCache struct {
	v   Verifier
	now func() time.Time

	mu sync.Mutex
	m  map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	claims *auth.Claims
	until  time.Time
}

var _ Verifier = (*tokenCache)(nil)

func newTokenCache(v Verifier) *tokenCache {
	return &tokenCache{v: v, now: time.Now, m: make(map[[sha256.Size]byte]cachedToken)}
}

// Verify returns the claims of header, from the cache when it verified
// them less than tokenTTL ago and the token has not expired. The claims
// are shared: callers must not modify them.
func (c *tokenCache) Verify(header string) (*auth.Claims, error) {
	key := sha256.Sum256([]byte(header))
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.claims, nil
	}
	claims, err := c.v.Verify(header)
	if err != nil {
		return nil, err
	}
	exp, ok := tokenExp(header)
	if !ok {
		return claims, nil
	}
	until := now.Add(tokenTTL)
	if exp.Before(until) {
		until = exp
	}
	if !now.Before(until) {
		return claims, nil
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedTokens {
		clear(c.m)
	}
	c.m[key] = cachedToken{claims: claims, until: until}
	c.mu.Unlock()
	return claims, nil
}

// tokenExp returns the exp claim of the JWT in a "Bearer <jwt>" header
// that the verifier accepted: its signature covers the payload read here.
func tokenExp(header string) (time.Time, bool) {
	_, token, _ := strings.Cut(strings.TrimSpace(header), " ")
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var p struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Exp == nil {
		return time.Time{}, false
	}
	secs, err := p.Exp.Float64()
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}
