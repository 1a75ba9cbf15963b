package tlscert

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/squallhq/squall/internal/logtest"
	"github.com/squallhq/squall/internal/tlscerttest"
)

// pair returns the paths of a certificate and key file in a new folder,
// holding a leaf of ca with the given serial.
func pair(t *testing.T, ca *tlscerttest.CA, serial int64) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteLeaf(t, certFile, keyFile, serial)
	return certFile, keyFile
}

// loaded returns a CA, the files of a leaf with serial 2 and a Reloader
// serving them.
func loaded(t *testing.T, opts Options) (ca *tlscerttest.CA, certFile, keyFile string, r *Reloader) {
	t.Helper()
	ca = tlscerttest.NewCA(t)
	certFile, keyFile = pair(t, ca, 2)
	r, err := Load(certFile, keyFile, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ca, certFile, keyFile, r
}

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ca := tlscerttest.NewCA(t)
	goodCert, goodKey := pair(t, ca, 2)
	_, otherKey := pair(t, ca, 3)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	write(t, garbage, []byte("not a PEM file\n"))
	keyPEM, err := os.ReadFile(goodKey)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.key")
	write(t, half, keyPEM[:len(keyPEM)/2])

	r, err := Load(goodCert, goodKey, Options{})
	if err != nil {
		t.Fatalf("good pair: %v", err)
	}
	if got := r.Certificate().Leaf.SerialNumber.Int64(); got != 2 {
		t.Errorf("serial %d, want 2", got)
	}
	cert, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || cert.Leaf.SerialNumber.Int64() != 2 {
		t.Errorf("GetCertificate: %v, %v", cert, err)
	}

	for _, tc := range []struct {
		name, cert, key string
		opts            Options
		want            []string // substrings of the error
	}{
		{"mismatched pair", goodCert, otherKey, Options{}, []string{goodCert, otherKey, "private key does not match public key"}},
		{"missing certificate", filepath.Join(dir, "nope.crt"), goodKey, Options{}, []string{"nope.crt", "no such file"}},
		{"missing key", goodCert, filepath.Join(dir, "nope.key"), Options{}, []string{"nope.key", "no such file"}},
		{"garbage certificate", garbage, goodKey, Options{}, []string{garbage, "failed to find any PEM data in certificate input"}},
		{"garbage key", goodCert, garbage, Options{}, []string{garbage, "failed to find any PEM data in key input"}},
		{"half-written key", goodCert, half, Options{}, []string{half, "key input"}},
		{"key as certificate", goodKey, goodKey, Options{}, []string{"certificate"}},
		{"negative interval", goodCert, goodKey, Options{CheckInterval: -time.Second}, []string{"-1s", "negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(tc.cert, tc.key, tc.opts)
			if err == nil {
				t.Fatalf("loaded %v", r.Certificate().Leaf.Subject)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error shows key material: %q", err)
			}
		})
	}
}

func TestReloader_TLSConfig(t *testing.T) {
	t.Parallel()
	ca, _, _, r := loaded(t, Options{})
	cfg := r.TLSConfig()
	if cfg.MinVersion != tls.VersionTLS12 || cfg.GetCertificate == nil || len(cfg.Certificates) != 0 ||
		strings.Join(cfg.NextProtos, ",") != "h2,http/1.1" {
		t.Fatalf("config %+v", cfg)
	}
	addr := serve(t, r)
	// TLS 1.1 is refused.
	d := tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}
	if conn, err := d.DialContext(t.Context(), "tcp", addr); err == nil {
		conn.Close()
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	// HTTP/2 is negotiated.
	resp, err := ca.Client(t).Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
	}
}

// serve serves HTTPS with r's configuration on a loopback port until the
// end of the test, answering 204, and returns the address.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		TLSConfig:         r.TLSConfig(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// servedSerial opens a new connection to addr, verifies the server against
// ca and returns the serial number of the certificate it presented.
func servedSerial(t *testing.T, ca *tlscerttest.CA, addr string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestReloader_Rotation serves HTTPS on a real listener, checking on every
// handshake, and rotates the files under it.
func TestReloader_Rotation(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	ca, certFile, keyFile, r := loaded(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	addr := serve(t, r)
	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	const failed, reloaded = "tls certificate reload failed", "tls certificate reloaded"

	if got := servedSerial(t, ca, addr); got != 2 {
		t.Fatalf("serial %d, want 2", got)
	}
	if count(reloaded) != 0 {
		t.Fatalf("unchanged files reloaded:\n%s", logs.String())
	}

	t.Run("new leaf", func(t *testing.T) {
		ca.WriteLeaf(t, certFile, keyFile, 3)
		if got := servedSerial(t, ca, addr); got != 3 {
			t.Fatalf("serial %d after rotation, want 3", got)
		}
		if count(reloaded) != 1 || !strings.Contains(logs.String(), "serial=3") {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})

	certPEM, _ := ca.Leaf(t, 4)
	_, otherKey := ca.Leaf(t, 5)
	t.Run("mismatched pair keeps the previous certificate", func(t *testing.T) {
		write(t, keyFile, otherKey)
		write(t, certFile, certPEM)
		for range 3 {
			if got := servedSerial(t, ca, addr); got != 3 {
				t.Fatalf("serial %d with a broken pair, want 3", got)
			}
		}
		if count(failed) != 1 || !strings.Contains(logs.String(), "private key does not match public key") {
			t.Fatalf("the error is not logged once:\n%s", logs.String())
		}
	})

	t.Run("half-written certificate keeps the previous certificate", func(t *testing.T) {
		write(t, certFile, certPEM[:len(certPEM)/2])
		for range 3 {
			if got := servedSerial(t, ca, addr); got != 3 {
				t.Fatalf("serial %d with a half-written certificate, want 3", got)
			}
		}
		if count(failed) != 2 {
			t.Fatalf("a new error is not logged once:\n%s", logs.String())
		}
	})

	t.Run("missing key keeps the previous certificate", func(t *testing.T) {
		if err := os.Remove(keyFile); err != nil {
			t.Fatal(err)
		}
		if got := servedSerial(t, ca, addr); got != 3 {
			t.Fatalf("serial %d without a key, want 3", got)
		}
		if count(failed) != 3 || !strings.Contains(logs.String(), "no such file") {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})

	t.Run("good pair again", func(t *testing.T) {
		ca.WriteLeaf(t, certFile, keyFile, 6)
		if got := servedSerial(t, ca, addr); got != 6 {
			t.Fatalf("serial %d after the repair, want 6", got)
		}
		if count(reloaded) != 2 || count(failed) != 3 {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})

	t.Run("the same error after a success is logged again", func(t *testing.T) {
		write(t, keyFile, otherKey)
		servedSerial(t, ca, addr)
		if got := servedSerial(t, ca, addr); got != 6 {
			t.Fatalf("serial %d, want 6", got)
		}
		if count(failed) != 4 {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})

	for _, secret := range []string{"PRIVATE KEY", "BEGIN", "CERTIFICATE-----"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs show file contents (%q):\n%s", secret, logs.String())
		}
	}
}

// TestReloader_CheckInterval: the files are checked at most once per
// interval (fake time).
func TestReloader_CheckInterval(t *testing.T) {
	t.Parallel()
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := pair(t, ca, 2)
	synctest.Test(t, func(t *testing.T) {
		r, err := Load(certFile, keyFile, Options{CheckInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ca.WriteLeaf(t, certFile, keyFile, 3)
		if got := getSerial(t, r); got != 2 {
			t.Fatalf("serial %d before the interval, want 2", got)
		}
		time.Sleep(59 * time.Second)
		if got := getSerial(t, r); got != 2 {
			t.Fatalf("serial %d before the interval, want 2", got)
		}
		time.Sleep(time.Second)
		if got := getSerial(t, r); got != 3 {
			t.Fatalf("serial %d after the interval, want 3", got)
		}
		ca.WriteLeaf(t, certFile, keyFile, 4)
		time.Sleep(30 * time.Second)
		if got := getSerial(t, r); got != 3 {
			t.Fatalf("serial %d half an interval after the last check, want 3", got)
		}
		time.Sleep(30 * time.Second)
		if got := getSerial(t, r); got != 4 {
			t.Fatalf("serial %d, want 4", got)
		}
	})
}

// TestReloader_Concurrent rotates the files while handshakes ask for the
// certificate (run with -race): every answer is one of the pairs written.
func TestReloader_Concurrent(t *testing.T) {
	t.Parallel()
	ca, certFile, keyFile, r := loaded(t, Options{})
	const rotations = 5
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 10000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cert, err := r.GetCertificate(&tls.ClientHelloInfo{})
				if err != nil || cert == nil {
					errs <- errors.Join(errors.New("no certificate"), err)
					return
				}
				if s := cert.Leaf.SerialNumber.Int64(); s < 2 || s > 2+rotations {
					errs <- errors.New("unknown serial")
					return
				}
			}
		})
	}
	for i := range int64(rotations) {
		ca.WriteLeaf(t, certFile, keyFile, 3+i)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := getSerial(t, r); got != 2+rotations {
		t.Errorf("serial %d after the rotations, want %d", got, 2+rotations)
	}
}

// getSerial returns the serial number of the certificate GetCertificate
// returns.
func getSerial(t *testing.T, r *Reloader) int64 {
	t.Helper()
	cert, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.SerialNumber.Int64()
}
