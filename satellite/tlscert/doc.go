// Package tlscert serves a TLS certificate and its private key from PEM
// files and picks up rotated files without a restart.
//
// [Load] reads the pair once and fails if it does not load or the key does
// not match the certificate. A [Reloader] then answers every handshake
// through [Reloader.GetCertificate]: at most once per check interval it
// compares the modification time, size and identity (os.SameFile) of both
// files with those of the pair it serves and, when one changed, loads the
// files again. A pair that fails to load (a half-written file, a key that
// does not match its certificate, a missing file) never replaces the one
// served: the previous certificate keeps being served, the error is logged
// once, and the next check tries again.
//
//	r, err := tlscert.Load("tls.crt", "tls.key", tlscert.Options{
//		CheckInterval: tlscert.DefaultCheckInterval,
//		Logger:        logger,
//	})
//	srv := &http.Server{TLSConfig: r.TLSConfig()}
//	err = srv.ServeTLS(ln, "", "")
//
// Writing the new key before the new certificate, or swapping a symbolic
// link to a folder holding both (as Kubernetes does for mounted secrets),
// keeps the window in which a check can see a mismatched pair short; such a
// check only delays the rotation to the next one. Neither the files'
// contents nor the key is ever logged.
package tlscert
