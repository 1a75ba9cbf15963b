package findings

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/squallhq/squall/internal/secretfile"
)

// sealedPrefix starts every encrypted password as stored.
const sealedPrefix = "enc:v1:"

// ErrNoKey means a stored password is encrypted and the API has no key.
var ErrNoKey = errors.New("the finding's password is encrypted and this master has no findings key (--findings-key)")

// Sealer encrypts passwords at rest with AES-256-GCM. The nonce is derived
// from the tenant and the password (HMAC-SHA-256 under a key derived from
// the findings key), so equal passwords of a tenant encrypt alike: the
// store can still deduplicate password-only findings, and reveals only
// that two of a tenant's stored passwords are equal. The tenant is the
// additional data: a sealed password does not decrypt under another
// tenant.
type Sealer struct {
	aead     cipher.AEAD
	nonceKey []byte
}

// NewSealer returns a sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("findings key: %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("findings key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("findings key: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("squall findings nonce key"))
	return &Sealer{aead: aead, nonceKey: m.Sum(nil)}, nil
}

// LoadKey reads a findings key file, 64 hexadecimal characters (32 bytes;
// e.g. `openssl rand -hex 32`), surrounding white space ignored, readable
// by its owner only (secretfile.Check).
func LoadKey(path string) (*Sealer, error) {
	b, err := secretfile.Read(path, 4<<10)
	if err != nil {
		return nil, fmt.Errorf("findings key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("findings key %s: want 64 hexadecimal characters: %w", path, err)
	}
	return NewSealer(key)
}

// Seal encrypts password for tenant; "" stays "".
func (s *Sealer) Seal(tenant, password string) string {
	if password == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.nonceKey)
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write([]byte(password))
	nonce := m.Sum(nil)[:s.aead.NonceSize()]
	out := s.aead.Seal(nonce, nonce, []byte(password), []byte(tenant))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// open returns the clear password of a stored one: a sealed password is
// decrypted (ErrNoKey without a sealer), any other is returned as is (it
// was stored without a key).
func (s *Sealer) open(tenant, stored string) (string, error) {
	rest, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return stored, nil
	}
	if s == nil {
		return "", ErrNoKey
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	n := s.aead.NonceSize()
	if err != nil || len(b) < n {
		return "", errors.New("a stored password is not a valid sealed value")
	}
	clear, err := s.aead.Open(nil, b[:n], b[n:], []byte(tenant))
	if err != nil {
		return "", fmt.Errorf("decrypt a stored password (wrong findings key?): %w", err)
	}
	return string(clear), nil
}
