package bench

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNewFindings_bad(t *testing.T) {
	t.Parallel()
	good := FindingsConfig{URL: "http://127.0.0.1:1", Token: "t", Connections: 1, Readers: 1, Duration: time.Second,
		Timeout: time.Second, PageSize: 10, Pages: 1}
	tests := []struct {
		name  string
		edit  func(c *FindingsConfig)
		field string
		msg   string
	}{
		{"no host", func(c *FindingsConfig) { c.URL = "http://" }, "url", "has no host"},
		{"query", func(c *FindingsConfig) { c.URL = "http://h/?token=s3cret" }, "url", "takes no query"},
		{"no token", func(c *FindingsConfig) { c.Token = "" }, "token", "empty"},
		{"token line break", func(c *FindingsConfig) { c.Token = "a\r\nHost: evil" }, "token", "line break"},
		{"readers", func(c *FindingsConfig) { c.Readers = -1 }, "readers", "not between 0"},
		{"page size", func(c *FindingsConfig) { c.PageSize = MaxPageSize + 1 }, "page_size", "not between 1 and 1000"},
		{"pages", func(c *FindingsConfig) { c.Pages = 0 }, "pages", "at least 1"},
		{"connections", func(c *FindingsConfig) { c.Connections = 0 }, "connections", "not between 1"},
		{"duration", func(c *FindingsConfig) { c.Duration = 0 }, "duration", "bounded in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tt.edit(&cfg)
			_, err := NewFindings(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("NewFindings: %v; want a %s error with %q", err, tt.field, tt.msg)
			}
		})
	}
	if _, err := NewFindings(good); err != nil {
		t.Errorf("NewFindings(good): %v", err)
	}
}

// TestFindings_requests checks the requests a findings run sends: each
// insert a distinct, valid finding; each read a page in range.
func TestFindings_requests(t *testing.T) {
	t.Parallel()
	f, err := NewFindings(FindingsConfig{URL: "http://127.0.0.1:1/proxy/", Token: "tok", Connections: 1, Readers: 1,
		Duration: time.Second, Timeout: time.Second, PageSize: 50, Pages: 3})
	if err != nil {
		t.Fatal(err)
	}
	insert := f.inserts.newVary()
	seen := map[string]bool{}
	for _, n := range []uint64{0, 1, 2, 1 << 40, 1<<64 - 1} {
		req := string(insert(nil, n))
		head, body, _ := strings.Cut(req, "\r\n\r\n")
		if !strings.HasPrefix(head, "PUT /proxy/intel/api/sdk/v0/findings/credentials HTTP/1.1\r\n") ||
			!strings.Contains(head, "\r\nAuthorization: Bearer tok") || !strings.Contains(head, "\r\nContent-Type: application/json") ||
			!strings.Contains(head, "\r\nContent-Length: "+strconv.Itoa(len(body))) {
			t.Fatalf("insert %d:\n%s", n, req)
		}
		var v struct {
			Username, Hash string
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil || len(v.Hash) != 64 || seen[v.Username] || seen[v.Hash] {
			t.Fatalf("insert %d: %v %+v", n, err, v)
		}
		seen[v.Username], seen[v.Hash] = true, true
	}
	read := f.pages.newVary()
	for n, page := range []string{"1", "2", "3", "1"} {
		if req := string(read(nil, uint64(n))); !strings.HasPrefix(req, "GET /proxy/intel/api/sdk/v0/findings/credential?limit=50&page="+page+" HTTP/1.1\r\n") ||
			!strings.HasSuffix(req, "Content-Length: 0\r\n\r\n") {
			t.Fatalf("read %d:\n%s", n, req)
		}
	}
}
