package dev

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hostCheck refuses the requests whose Host header names another
// server than squall dev: a web page that rebinds its own DNS name to
// 127.0.0.1 reaches the listener, but its requests carry its name. It
// accepts the host of the --http address (listen), localhost and every
// loopback IP, with any port; anything else, a missing Host included, gets
// 421 Misdirected Request with a JSON error. A name that resolves to a
// loopback address (localhost.example) is refused: a rebinding page uses
// exactly such a name.
func hostCheck(listen string, next http.Handler) http.Handler {
	own, _, _ := net.SplitHostPort(listen)
	own = strings.ToLower(strings.Trim(own, "[]"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostAllowed(r, own) {
			next.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if len(host) > 256 {
			host = host[:256]
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"code":   "MISDIRECTED_REQUEST",
			"params": map[string]any{"host": host},
			"message": "squall dev answers only requests addressed to " + listen +
				", localhost or a loopback address (Host header); this protects it from DNS rebinding by web pages",
		})
	})
}

// hostAllowed reports whether the request's Host names squall dev.
func hostAllowed(r *http.Request, own string) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	switch {
	case host == "":
		return false
	case host == "localhost" || host == own:
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return ip.Unmap().IsLoopback()
}
