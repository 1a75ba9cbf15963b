package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCheckInterval is the check interval commands use: a rotated pair
// is served within this time.
const DefaultCheckInterval = 10 * time.Second

// Options configures a [Reloader].
type Options struct {
	// CheckInterval is the least time between two checks of the files; zero
	// checks them on every handshake.
	CheckInterval time.Duration
	// Logger receives a message when a rotated pair is loaded and one when
	// loading it fails (once per distinct error). Nil discards.
	Logger *slog.Logger
}

// Reloader serves the certificate of a pair of PEM files and reloads it when
// the files change. Build it with [Load]; it is safe for concurrent use.
type Reloader struct {
	certFile, keyFile string
	interval          time.Duration
	logger            *slog.Logger

	cert      atomic.Pointer[tls.Certificate]
	start     time.Time    // monotonic origin of lastCheck
	lastCheck atomic.Int64 // time of the last check, in nanoseconds since start

	mu      sync.Mutex // serializes checks; guards the fields below
	loaded  [2]os.FileInfo
	lastErr string // the last error logged, "" after a success
}

// Load reads the certificate chain of certFile and the private key of
// keyFile (PEM) and returns a Reloader serving them. It fails if either file
// cannot be read or parsed, or if the key does not match the certificate.
func Load(certFile, keyFile string, opts Options) (*Reloader, error) {
	if opts.CheckInterval < 0 {
		return nil, fmt.Errorf("tls check interval %s: must not be negative", opts.CheckInterval)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, interval: opts.CheckInterval, logger: opts.Logger, start: time.Now()}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.logger = r.logger.With("component", "tlscert")
	infos, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := r.read()
	if err != nil {
		return nil, err
	}
	r.cert.Store(cert)
	r.loaded = infos
	return r, nil
}

// GetCertificate returns the certificate to serve, after checking the files
// if the check interval has passed since the last check. It never fails
// once Load succeeded: a pair that does not load leaves the previous
// certificate in place. It is meant for [tls.Config.GetCertificate].
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.check()
	return r.cert.Load(), nil
}

// Certificate returns the certificate served now, without checking the
// files.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// TLSConfig returns a server configuration that serves r's certificate:
// TLS 1.2 or later, HTTP/2 and HTTP/1.1 offered through ALPN.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// check reloads the pair if the interval has passed and the files changed.
func (r *Reloader) check() {
	due := func() bool {
		return r.interval == 0 || time.Since(r.start)-time.Duration(r.lastCheck.Load()) >= r.interval
	}
	if !due() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !due() {
		return // another handshake checked meanwhile
	}
	r.lastCheck.Store(int64(time.Since(r.start)))
	infos, err := r.stat()
	if err == nil && r.lastErr == "" && same(infos, r.loaded) {
		return
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = r.read()
	}
	if err != nil {
		// Keep serving the previous pair; log each distinct error once
		// and try again at the next check.
		if msg := err.Error(); msg != r.lastErr {
			r.lastErr = msg
			r.logger.Error("tls certificate reload failed; serving the previous certificate", "error", err)
		}
		return
	}
	r.cert.Store(cert)
	r.loaded = infos
	r.lastErr = ""
	r.logger.Info("tls certificate reloaded", "cert_file", r.certFile, "serial", cert.Leaf.SerialNumber.String(),
		"not_after", cert.Leaf.NotAfter.UTC())
}

// stat returns the file information of the certificate and key files.
func (r *Reloader) stat() ([2]os.FileInfo, error) {
	var infos [2]os.FileInfo
	for i, name := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return infos, fmt.Errorf("tls certificate: %w", err)
		}
		infos[i] = fi
	}
	return infos, nil
}

// read loads and checks the pair. Its errors name the files, never their
// contents.
func (r *Reloader) read() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls certificate %s: %w", r.certFile, err)
		}
	}
	return &cert, nil
}

// same reports whether two stats of the pair show the same files unchanged.
func same(a, b [2]os.FileInfo) bool {
	for i := range a {
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}
