package clientaddr

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestResolver_Client(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", " 2001:db8::/32", "", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	xff, err := New(trusted, "")
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := New(trusted, "forwarded")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		r       *Resolver
		remote  string
		headers []string // name: value
		want    string
	}{
		{"untrusted peer, header ignored", xff, "203.0.113.5:4000", []string{"X-Forwarded-For: 10.1.1.1"}, "203.0.113.5"},
		{"nobody trusted", &Resolver{}, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1"}, "10.0.0.1"},
		{"nil resolver", nil, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1"}, "10.0.0.1"},
		{"trusted peer, no header", xff, "10.0.0.1:4000", nil, "10.0.0.1"},
		{"one proxy", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1"}, "198.51.100.1"},
		{"forged left entries", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 10.9.9.9, 6.6.6.6, 198.51.100.1"}, "198.51.100.1"},
		{"two proxies", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 6.6.6.6, 198.51.100.1, 192.0.2.7"}, "198.51.100.1"},
		{"several lines", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 6.6.6.6", "X-Forwarded-For: 198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"all trusted", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"garbage stops the walk", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1, bogus, 10.2.2.2"}, "10.2.2.2"},
		{"ipv6 peer and entry", xff, "[2001:db8::1]:4000", []string{"X-Forwarded-For: 2001:db9::5"}, "2001:db9::5"},
		{"mapped peer", xff, "[::ffff:10.0.0.1]:4000", []string{"X-Forwarded-For: ::ffff:198.51.100.1"}, "198.51.100.1"},
		{"entry with port", xff, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1:5555"}, "198.51.100.1"},
		{"forwarded ignores xff", fwd, "10.0.0.1:4000", []string{"X-Forwarded-For: 198.51.100.1"}, "10.0.0.1"},
		{"xff ignores forwarded", xff, "10.0.0.1:4000", []string{"Forwarded: for=198.51.100.1"}, "10.0.0.1"},
		{"forwarded", fwd, "10.0.0.1:4000", []string{`Forwarded: for=6.6.6.6, for=198.51.100.1;proto=https`}, "198.51.100.1"},
		{"forwarded ipv6", fwd, "10.0.0.1:4000", []string{`Forwarded: for="[2001:db9::5]:80";by=10.0.0.1`}, "2001:db9::5"},
		{"forwarded unknown", fwd, "10.0.0.1:4000", []string{`Forwarded: for=198.51.100.1, for=unknown`}, "10.0.0.1"},
		{"forwarded obfuscated", fwd, "10.0.0.1:4000", []string{`Forwarded: for=_hidden`}, "10.0.0.1"},
		{"forwarded without for", fwd, "10.0.0.1:4000", []string{`Forwarded: proto=https`}, "10.0.0.1"},
		{"not an address", xff, "@", nil, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
			req.RemoteAddr = tt.remote
			for _, h := range tt.headers {
				k, v, _ := strings.Cut(h, ": ")
				req.Header.Add(k, v)
			}
			if got := tt.r.Client(req); got.String() != tt.want {
				t.Errorf("Client = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResolver_LongHeader(t *testing.T) {
	t.Parallel()
	r, err := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, HeaderXForwardedFor)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	req.RemoteAddr = "10.0.0.1:1"
	req.Header.Set("X-Forwarded-For", "198.51.100.1, "+strings.Repeat("10.0.0.2, ", 100)+"10.0.0.3")
	// Only the last 32 entries are read: all trusted, the leftmost read wins.
	if got := r.Client(req); got.String() != "10.0.0.2" {
		t.Errorf("Client = %s", got)
	}
}

func TestNew_Bad(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, "X-Real-IP"); err == nil || !strings.Contains(err.Error(), "must be X-Forwarded-For or Forwarded") {
		t.Errorf("New with X-Real-IP: %v", err)
	}
	if _, err := New([]netip.Prefix{{}}, ""); err == nil {
		t.Error("New with an invalid prefix: no error")
	}
	for _, s := range []string{"10.0.0.1/8", "proxy.example", "10.0.0.0/33"} {
		if _, err := ParsePrefixes([]string{s}); err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("ParsePrefixes(%q): %v", s, err)
		}
	}
}
