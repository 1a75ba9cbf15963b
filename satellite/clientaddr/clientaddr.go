// Package clientaddr finds the address of the client of an HTTP request:
// the connection's peer, or, when that peer is a trusted proxy, the
// rightmost address of the proxies' forwarding header that is not itself a
// trusted proxy. Headers from any other peer are ignored, so a client can
// not choose its own address.
package clientaddr

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/squallhq/squall/webhooks"
)

// Forwarding headers a [Resolver] reads.
const (
	// HeaderXForwardedFor is X-Forwarded-For: a comma-separated list of
	// addresses, each proxy appending its peer.
	HeaderXForwardedFor = "X-Forwarded-For"
	// HeaderForwarded is the RFC 7239 Forwarded header; its for=
	// parameters are read.
	HeaderForwarded = "Forwarded"
)

// maxHops bounds how many entries of a forwarding header are looked at.
const maxHops = 32

// Resolver finds client addresses. The zero value trusts nobody: every
// request's client is its peer.
type Resolver struct {
	trusted []netip.Prefix
	header  string
}

// New returns a Resolver that believes the header (HeaderXForwardedFor or
// HeaderForwarded; "" is X-Forwarded-For) of peers within trusted.
func New(trusted []netip.Prefix, header string) (*Resolver, error) {
	switch http.CanonicalHeaderKey(header) {
	case "", HeaderXForwardedFor:
		header = HeaderXForwardedFor
	case HeaderForwarded:
		header = HeaderForwarded
	default:
		return nil, fmt.Errorf("trusted proxy header %q: must be %s or %s", header, HeaderXForwardedFor, HeaderForwarded)
	}
	for _, p := range trusted {
		if !p.IsValid() {
			return nil, errors.New("trusted proxies: invalid prefix")
		}
	}
	return &Resolver{trusted: trusted, header: header}, nil
}

// ParsePrefixes parses a list of CIDR prefixes or single addresses, such as
// the values of a --trusted-proxies flag, with [webhooks.ParsePrefix]; empty
// entries are skipped.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := webhooks.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Trusts reports whether addr is a trusted proxy.
func (r *Resolver) Trusts(addr netip.Addr) bool {
	if r == nil {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, p := range r.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Client returns the address of the client of req. The peer is
// req.RemoteAddr; when it is not an address (an in-memory listener), the
// zero Addr is returned, which no "allow_ips" prefix contains. When the
// peer is trusted, the forwarding header's entries are read from right to
// left and the first untrusted one is the client; an entry that does not
// parse (obfuscated, "unknown", garbage) stops the walk and the last
// trusted hop is the client. When every entry is trusted, the leftmost is.
func (r *Resolver) Client(req *http.Request) netip.Addr {
	return r.ClientOf(parsePeer(req.RemoteAddr), req.Header)
}

// Header gives all the values of a request's header field (any case);
// [http.Header] is one, and so is a view of another HTTP server's request.
type Header interface {
	Values(name string) []string
}

// ClientOf is [Resolver.Client] for a request from peer (the zero Addr when
// it is not an IP address) with headers h.
func (r *Resolver) ClientOf(peer netip.Addr, h Header) netip.Addr {
	if peer.IsValid() {
		peer = peer.Unmap().WithZone("")
	}
	if !peer.IsValid() || !r.Trusts(peer) {
		return peer
	}
	hops := r.hops(h)
	client := peer
	for i := len(hops) - 1; i >= 0 && i >= len(hops)-maxHops; i-- {
		a, ok := parseHop(hops[i], r.header == HeaderForwarded)
		if !ok {
			return client
		}
		client = a
		if !r.Trusts(a) {
			return a
		}
	}
	return client
}

// hops returns the entries of the forwarding header, in order, across all
// its lines.
func (r *Resolver) hops(h Header) []string {
	var hops []string
	for _, line := range h.Values(r.header) {
		for part := range strings.SplitSeq(line, ",") {
			hops = append(hops, strings.TrimSpace(part))
		}
	}
	return hops
}

// parseHop parses one entry: an address, or with forwarded a
// Forwarded element whose for= parameter is one (quoted, with a port,
// IPv6 in brackets).
func parseHop(s string, forwarded bool) (netip.Addr, bool) {
	if forwarded {
		found := false
		for pair := range strings.SplitSeq(s, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && strings.EqualFold(k, "for") {
				s, found = strings.Trim(v, `"`), true
				break
			}
		}
		if !found {
			return netip.Addr{}, false
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// parsePeer parses a RemoteAddr, host:port.
func parsePeer(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}
