// Package auth authenticates the bearer tokens of Squall's APIs and
// authorizes what they may do.
//
// A token carries a user and a map of named authorizations, each a node
// path of the processing tree (the part of the tree the holder may touch)
// and roles. The findings API also reads the tenant the token may use.
//
// Two token formats are accepted (docs/decisions.md decision 17):
//
//   - signed JWTs (HS256 with a shared key, or EdDSA with an Ed25519 public
//     key) whose claims are {user, auths, tenant} plus exp, which is
//     required. alg "none" and any algorithm other than the configured one
//     are refused, so a token cannot pick its own verification.
//   - when [Verifier.AllowUnsigned] is set (squall dev, or behind an
//     authenticating proxy): the spec's base64 JSON {user, auths}.
//
// Roles (decision 8): view reads the active tree and drafts; edit implies
// view and modifies drafts; test_event_execute_actions is needed on top for
// test events with process_type Full; fleet_report only lets engines and
// satellites post their heartbeats to the fleet list (it implies no other
// role, and no other role but admin implies it); admin is everything.
//
// The findings API (decision 8) needs findings_read to read a tenant's
// findings and findings_write to insert or patch them, on an authorization
// whose path is [root] or [root, T, ...] for the tenant T: view implies
// findings_read, edit implies both, and the two findings roles imply no
// other role, so that an integration can be given findings only.
//
// The dead-letter API (decision 59) needs deadletters_read on the root to
// list and read dead letters (event bodies of every tenant) and
// deadletters_replay, which implies it, to replay them; neither view nor
// edit implies them.
package auth

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/squallhq/squall/config"
)

// Errors. ErrUnauthenticated maps to 401, ErrForbidden to 403.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Authorization is one named entry of a token's auths.
type Authorization struct {
	// Path lists node names from root down to the node the holder may
	// touch; its last node is the root of the holder's URL paths.
	Path  []string `json:"path"`
	Roles []string `json:"roles"`
}

// Claims is what a token says about its holder.
type Claims struct {
	User  string                   `json:"user"`
	Auths map[string]Authorization `json:"auths"`
	// Tenant is the tenant the findings API lets the holder read and write.
	Tenant string `json:"tenant,omitempty"`
}

// FindingsTenant returns the one tenant the findings API lets the holder
// use (DESIGN decision 17): the tenant claim when it is set; otherwise,
// when every authorization's path is [root, T, …] with the same T, that T,
// so that a token in the spec's format scoped to one tenant works as is.
// It reports false when the token names no tenant, or several.
func (c *Claims) FindingsTenant() (string, bool) {
	if c.Tenant != "" {
		return c.Tenant, true
	}
	tenant := ""
	for _, a := range c.Auths {
		if len(a.Path) < 2 || a.Path[0] != "root" || a.Path[1] == "" {
			return "", false
		}
		if tenant != "" && tenant != a.Path[1] {
			return "", false
		}
		tenant = a.Path[1]
	}
	return tenant, tenant != ""
}

// FindingsAllowed checks that one of the token's authorizations for the
// tenant grants p: one whose path is [root] (the whole tree) or
// [root, tenant, ...]. The error, wrapping ErrForbidden, names the missing
// role and the roles that imply it.
func (c *Claims) FindingsAllowed(tenant string, p Permission) error {
	for _, a := range c.Auths {
		if len(a.Path) == 0 || a.Path[0] != config.RootName || len(a.Path) > 1 && a.Path[1] != tenant {
			continue
		}
		if a.Grants(p) {
			return nil
		}
	}
	implied := "view, edit or admin"
	if p == FindingsWrite {
		implied = "edit or admin"
	}
	return fmt.Errorf("%w: the token lacks role %s (or %s) on an authorization of tenant %q (path [%s] or [%s, %s, ...]); mint one with squall token --auth NAME=%s,%s:%s",
		ErrForbidden, p, implied, tenant, config.RootName, config.RootName, tenant, config.RootName, tenant, p)
}

// FindingsClaims returns the claims of an integration that uses tenant's
// findings, and nothing else, with the roles: a tenant claim and one
// authorization, "findings", on [root, tenant].
func FindingsClaims(user, tenant string, roles ...Permission) Claims {
	rs := make([]string, len(roles))
	for i, r := range roles {
		rs[i] = string(r)
	}
	return Claims{User: user, Tenant: tenant, Auths: map[string]Authorization{
		"findings": {Path: []string{config.RootName, tenant}, Roles: rs},
	}}
}

// Permission is something a request needs.
type Permission string

// The permissions of the configuration and test-event APIs.
const (
	View               Permission = "view"
	Edit               Permission = "edit"
	ExecuteTestActions Permission = "test_event_execute_actions"
	Admin              Permission = "admin"
	// FleetReport lets engines and satellites post heartbeats to the
	// fleet list, and nothing else (docs/decisions.md decision 29).
	FleetReport Permission = "fleet_report"
	// FindingsRead lets the holder read a tenant's findings, plaintext
	// passwords included. view implies it.
	FindingsRead Permission = "findings_read"
	// FindingsWrite lets the holder insert and patch a tenant's findings.
	// edit implies it.
	FindingsWrite Permission = "findings_write"
	// DeadLettersRead lets the holder list and read the dead letters,
	// the events' bodies included, of every tenant: only on the root
	// (docs/decisions.md decision 59). No role but admin and
	// deadletters_replay implies it.
	DeadLettersRead Permission = "deadletters_read"
	// DeadLettersReplay lets the holder replay dead letters to the events
	// topic; it implies DeadLettersRead.
	DeadLettersReplay Permission = "deadletters_replay"
)

// Grants reports whether the authorization's roles grant the permission.
func (a Authorization) Grants(p Permission) bool {
	for _, r := range a.Roles {
		switch Permission(r) {
		case Admin:
			return true
		case p:
			return true
		case Edit:
			if p == View || p == FindingsRead || p == FindingsWrite {
				return true
			}
		case View:
			if p == FindingsRead {
				return true
			}
		case DeadLettersReplay:
			if p == DeadLettersRead {
				return true
			}
		}
	}
	return false
}

// Verifier checks tokens.
type Verifier struct {
	// HMACKey verifies HS256 tokens.
	HMACKey []byte
	// PublicKey verifies EdDSA tokens.
	PublicKey ed25519.PublicKey
	// AllowUnsigned accepts the base64 JSON tokens of the spec.
	AllowUnsigned bool
	// Leeway tolerates clock skew on exp and nbf.
	Leeway time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// maxToken bounds the size of a token.
const maxToken = 16 << 10

// Verify authenticates the value of an Authorization header and returns
// the token's claims.
func (v *Verifier) Verify(header string) (*Claims, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, fmt.Errorf("%w: expected an Authorization header of the form \"Bearer <token>\"", ErrUnauthenticated)
	}
	token = strings.TrimSpace(token)
	if token == "" || len(token) > maxToken {
		return nil, fmt.Errorf("%w: empty or oversized token", ErrUnauthenticated)
	}
	var c *Claims
	var err error
	if strings.Count(token, ".") == 2 {
		c, err = v.verifyJWT(token)
	} else if v.AllowUnsigned {
		c, err = decodeUnsigned(token)
	} else {
		err = fmt.Errorf("%w: only signed tokens (JWT) are accepted", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	if c.User == "" {
		return nil, fmt.Errorf("%w: the token's user is empty", ErrUnauthenticated)
	}
	return c, nil
}

func decodeUnsigned(token string) (*Claims, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(token)
	if err != nil {
		return nil, fmt.Errorf("%w: the token is neither a JWT nor base64 JSON", ErrUnauthenticated)
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: the token's JSON: %w", ErrUnauthenticated, err)
	}
	return &c, nil
}

// jwtClaims are the claims of signed tokens.
type jwtClaims struct {
	Claims
	jwt.RegisteredClaims
}

func (v *Verifier) verifyJWT(token string) (*Claims, error) {
	var method string
	var key any
	switch {
	case len(v.PublicKey) == ed25519.PublicKeySize:
		method, key = jwt.SigningMethodEdDSA.Alg(), v.PublicKey
	case len(v.HMACKey) > 0:
		method, key = jwt.SigningMethodHS256.Alg(), v.HMACKey
	default:
		return nil, fmt.Errorf("%w: no key is configured to verify signed tokens", ErrUnauthenticated)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{method}), jwt.WithExpirationRequired(), jwt.WithLeeway(v.Leeway)}
	if v.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(v.Now))
	}
	var c jwtClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return key, nil }, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	return &c.Claims, nil
}

// Signer mints signed tokens.
type Signer struct {
	HMACKey    []byte
	PrivateKey ed25519.PrivateKey
	Now        func() time.Time
}

// Sign returns a JWT carrying the claims, valid for ttl.
func (s *Signer) Sign(c Claims, ttl time.Duration) (string, error) {
	if c.User == "" {
		return "", errors.New("sign: the user is empty")
	}
	if ttl <= 0 {
		return "", errors.New("sign: the lifetime must be positive")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now()
	claims := jwtClaims{Claims: c, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   c.User,
		IssuedAt:  jwt.NewNumericDate(t),
		ExpiresAt: jwt.NewNumericDate(t.Add(ttl)),
	}}
	switch {
	case len(s.PrivateKey) == ed25519.PrivateKeySize:
		return jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(s.PrivateKey)
	case len(s.HMACKey) > 0:
		return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.HMACKey)
	}
	return "", errors.New("sign: no key")
}

// EncodeUnsigned returns the spec's unsigned token for the claims.
func EncodeUnsigned(c Claims) string {
	b, _ := json.Marshal(c)
	return base64.StdEncoding.EncodeToString(b)
}

// Scope is an authorization picked by a request's param_auth.
type Scope struct {
	User string
	Name string
	Authorization
}

// OnRoot checks that one of c's authorizations is on the whole tree
// (path ["root"]) and grants p; the error wraps ErrForbidden.
func (c *Claims) OnRoot(p Permission) error {
	for _, a := range c.Auths {
		if len(a.Path) == 1 && a.Path[0] == config.RootName && a.Grants(p) {
			return nil
		}
	}
	return fmt.Errorf("%w: the token has no authorization on %q that grants %s", ErrForbidden, config.RootName, p)
}

// Scope picks the named authorization and checks that it grants p.
func (c *Claims) Scope(name string, p Permission) (*Scope, error) {
	a, ok := c.Auths[name]
	if !ok {
		return nil, fmt.Errorf("%w: the token has no authorization %q", ErrForbidden, name)
	}
	if len(a.Path) == 0 || a.Path[0] != config.RootName {
		return nil, fmt.Errorf("%w: authorization %q: its path must start with %q", ErrForbidden, name, config.RootName)
	}
	for _, n := range a.Path {
		if !config.ValidName(n) {
			return nil, fmt.Errorf("%w: authorization %q: invalid node name %q in its path", ErrForbidden, name, n)
		}
	}
	if !a.Grants(p) {
		return nil, fmt.Errorf("%w: authorization %q does not grant %s", ErrForbidden, name, p)
	}
	return &Scope{User: c.User, Name: name, Authorization: a}, nil
}

// Base returns the authorization's path: the root of its URL paths is its last node.
func (s *Scope) Base() []string { return slices.Clone(s.Path) }

// Resolve turns a URL node path (comma-separated names, starting at the
// authorization's last node) into an absolute path from the tree's root.
// Empty means the authorization's own node. Anything that does not start
// at that node, or holds an invalid name (which covers "..", dots, slashes
// and encoded tricks), is forbidden.
func (s *Scope) Resolve(nodePath string) ([]string, error) {
	base := s.Base()
	if nodePath == "" {
		return base, nil
	}
	parts := strings.Split(nodePath, ",")
	for _, p := range parts {
		if !config.ValidName(p) {
			return nil, fmt.Errorf("%w: %q is not a node name", ErrForbidden, p)
		}
	}
	if parts[0] != base[len(base)-1] {
		return nil, fmt.Errorf("%w: node path %q must start at %q, the root of authorization %q", ErrForbidden, nodePath, base[len(base)-1], s.Name)
	}
	return append(base, parts[1:]...), nil
}
