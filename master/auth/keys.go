package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/squallhq/squall/internal/secretfile"
)

// MinHMACKey is the shortest HS256 key accepted: 32 bytes.
const MinHMACKey = 32

// maxKeyFile bounds a key file.
const maxKeyFile = 64 << 10

// LoadHMACKey reads an HS256 key file: its bytes, surrounding whitespace
// removed. The file must be readable by its owner only (secretfile.Check).
func LoadHMACKey(path string) ([]byte, error) {
	b, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read HMAC key: %w", err)
	}
	if len(b) < MinHMACKey {
		return nil, fmt.Errorf("HMAC key %s: %d bytes, want at least %d", path, len(b), MinHMACKey)
	}
	return b, nil
}

// LoadEd25519Private reads a PEM PKCS#8 Ed25519 private key
// (openssl genpkey -algorithm ed25519), readable by its owner only
// (secretfile.Check).
func LoadEd25519Private(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if err := secretfile.Check(path, info); err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	pk, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key %s: not an Ed25519 key", path)
	}
	return pk, nil
}

// LoadEd25519Public reads a PEM PKIX Ed25519 public key
// (openssl pkey -in key.pem -pubout).
func LoadEd25519Public(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	pk, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key %s: not an Ed25519 key", path)
	}
	return pk, nil
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("key %s: no PEM block", path)
	}
	if block.Type != typ {
		return nil, fmt.Errorf("key %s: PEM block %q, want %q", path, block.Type, typ)
	}
	return block.Bytes, nil
}

// ParseAuth parses the command-line form of an authorization:
// NAME=PATH:ROLES, where PATH and ROLES are comma-separated, e.g.
// master=root,master:view,edit.
func ParseAuth(s string) (string, Authorization, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return "", Authorization{}, errors.New("authorization: want NAME=PATH:ROLES, e.g. all=root:admin")
	}
	path, roles, ok := strings.Cut(rest, ":")
	if !ok || path == "" || roles == "" {
		return "", Authorization{}, fmt.Errorf("authorization %s: want NAME=PATH:ROLES, e.g. %s=root:view", name, name)
	}
	a := Authorization{Path: splitComma(path), Roles: splitComma(roles)}
	for _, r := range a.Roles {
		switch Permission(r) {
		case View, Edit, ExecuteTestActions, FleetReport, FindingsRead, FindingsWrite, Admin:
		default:
			return "", Authorization{}, fmt.Errorf("authorization %s: unknown role %q (want view, edit, test_event_execute_actions, fleet_report, findings_read, findings_write or admin)", name, r)
		}
	}
	return name, a, nil
}

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}
