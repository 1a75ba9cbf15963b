package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	privDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	privFile := write("key.pem", "PRIVATE KEY", privDER)
	pubFile := write("pub.pem", "PUBLIC KEY", pubDER)
	k, err := LoadEd25519Private(privFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadEd25519Public(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := (&Signer{PrivateKey: k}).Sign(claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Verifier{PublicKey: p}).Verify("Bearer " + tok); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEd25519Private(pubFile); err == nil {
		t.Error("loaded a public key as a private key")
	}
	if _, err := LoadEd25519Public(privFile); err == nil {
		t.Error("loaded a private key as a public key")
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	if _, err := LoadHMACKey(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short HMAC key: %v", err)
	}
	if _, err := LoadHMACKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("loaded a missing key")
	}
	if _, err := LoadEd25519Public(short); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("not PEM: %v", err)
	}
}

func TestParseAuth(t *testing.T) {
	t.Parallel()
	name, a, err := ParseAuth("acme=root, acme:view,edit")
	if err != nil || name != "acme" || strings.Join(a.Path, "/") != "root/acme" || strings.Join(a.Roles, "/") != "view/edit" {
		t.Errorf("%s %+v %v", name, a, err)
	}
	if _, a, err := ParseAuth("fleet=root:fleet_report"); err != nil || !a.Grants(FleetReport) {
		t.Errorf("fleet_report: %+v %v", a, err)
	}
	for _, bad := range []string{"", "x", "=root:view", "x=root", "x=:view", "x=root:", "x=root:fly"} {
		if _, _, err := ParseAuth(bad); err == nil {
			t.Errorf("ParseAuth(%q) accepted", bad)
		}
	}
}
