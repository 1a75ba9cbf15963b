package signing

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// opensslHMAC computes an HMAC with the openssl command line tool, an
// implementation independent of Go's crypto/hmac.
func opensslHMAC(t *testing.T, algorithm string, key, content []byte) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "openssl", "dgst", "-"+algorithm, "-mac", "HMAC", "-macopt", "hexkey:"+hex.EncodeToString(key), "-binary")
	cmd.Stdin = bytes.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	return out
}

// TestVerifier_OpenSSL verifies requests signed by openssl, for every
// scheme. CI (.ci/run, which sets CI) installs openssl and the test fails
// without it; elsewhere it is skipped.
func TestVerifier_OpenSSL(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		if _, ci := os.LookupEnv("CI"); ci {
			t.Fatal("openssl not installed (CI is set)")
		}
		t.Skip("openssl not installed")
	}
	now := time.Unix(1764150000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"action": "opened", "n": 1.50}`)
	stdKey := []byte("standard-webhooks key, 32 bytes")
	tests := []struct {
		name   string
		cfg    Config
		secret string
		header func(t *testing.T) http.Header
	}{
		{"github", Config{Scheme: SchemeGitHub}, "gh secret", func(t *testing.T) http.Header {
			sum := opensslHMAC(t, "sha256", []byte("gh secret"), body)
			return http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(sum)}}
		}},
		{"standard-webhooks", Config{Scheme: SchemeStandardWebhooks}, "whsec_" + base64.StdEncoding.EncodeToString(stdKey), func(t *testing.T) http.Header {
			sum := opensslHMAC(t, "sha256", stdKey, append([]byte("msg_2Kq."+ts+"."), body...))
			return http.Header{"Webhook-Id": {"msg_2Kq"}, "Webhook-Timestamp": {ts},
				"Webhook-Signature": {"v1,bm90IHRoaXMgb25l v1," + base64.StdEncoding.EncodeToString(sum)}}
		}},
		{"stripe", Config{Scheme: SchemeStripe}, "whsec_stripe", func(t *testing.T) http.Header {
			sum := opensslHMAC(t, "sha256", []byte("whsec_stripe"), append([]byte(ts+"."), body...))
			return http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + hex.EncodeToString(sum)}}
		}},
		{"slack", Config{Scheme: SchemeSlack}, "slack secret", func(t *testing.T) http.Header {
			sum := opensslHMAC(t, "sha256", []byte("slack secret"), append([]byte("v0:"+ts+":"), body...))
			return http.Header{"X-Slack-Request-Timestamp": {ts}, "X-Slack-Signature": {"v0=" + hex.EncodeToString(sum)}}
		}},
		{"hmac sha512 base64 timestamp", Config{Scheme: SchemeHMAC, Header: "X-Signature", Prefix: "sha512=", Encoding: EncodingBase64,
			Algorithm: AlgorithmSHA512, TimestampHeader: "X-Timestamp", Content: "{timestamp}:{body}"}, "generic", func(t *testing.T) http.Header {
			sum := opensslHMAC(t, "sha512", []byte("generic"), append([]byte(ts+":"), body...))
			return http.Header{"X-Timestamp": {ts}, "X-Signature": {"sha512=" + base64.StdEncoding.EncodeToString(sum)}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, tt.cfg, "whsec_b3RoZXI=", tt.secret) // another key first
			h := tt.header(t)
			if got := outcome(v.Verify(h, body, now)); got != "ok 1" {
				t.Errorf("Verify = %s, want ok 1", got)
			}
			if got := outcome(v.Verify(h, append(body, ' '), now)); got != "mismatch" {
				t.Errorf("Verify of another body = %s, want mismatch", got)
			}
		})
	}
}
