package ratelimit

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/webhooks"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestLimiters_Allow(t *testing.T) {
	t.Parallel()
	l := New(0)
	cfg := webhooks.RateLimit{Rate: 2, Burst: 3}
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 3 {
		if ok, _ := l.Allow("h", cfg, a, t0); !ok {
			t.Fatalf("call %d of the burst refused", i)
		}
	}
	ok, wait := l.Allow("h", cfg, a, t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th call: %t, %s; want refused, 500ms", ok, wait)
	}
	// A refused call takes nothing: half a second later one call passes.
	if ok, _ := l.Allow("h", cfg, a, t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait")
	}
	// The bucket is the webhook's: another address shares it, another
	// webhook does not.
	if ok, _ := l.Allow("h", cfg, netip.MustParseAddr("192.0.2.2"), t0.Add(500*time.Millisecond)); ok {
		t.Error("another client got around the webhook's limit")
	}
	if ok, _ := l.Allow("other", cfg, a, t0); !ok {
		t.Error("another webhook shares the bucket")
	}
	// A changed setting (a reloaded file) starts a full bucket.
	if ok, _ := l.Allow("h", webhooks.RateLimit{Rate: 2, Burst: 4}, a, t0.Add(500*time.Millisecond)); !ok {
		t.Error("a new setting kept the old bucket")
	}
	if l.Clients() != 0 {
		t.Errorf("Clients = %d without per_client", l.Clients())
	}
}

func TestLimiters_PerClient(t *testing.T) {
	t.Parallel()
	l := New(2)
	cfg := webhooks.RateLimit{Rate: 1, Burst: 1, PerClient: true}
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	for _, addr := range []netip.Addr{a, b} {
		if ok, _ := l.Allow("h", cfg, addr, t0); !ok {
			t.Fatalf("%s refused", addr)
		}
	}
	if ok, wait := l.Allow("h", cfg, a, t0); ok || wait != time.Second {
		t.Fatalf("second call of a: %t %s", ok, wait)
	}
	// The IPv4-mapped form is the same client.
	if ok, _ := l.Allow("h", cfg, netip.MustParseAddr("192.0.2.2"), t0); ok {
		t.Error("192.0.2.2 and ::ffff:192.0.2.2 have two buckets")
	}
	// A third client evicts the least recently used (a, used before b).
	if ok, _ := l.Allow("h", cfg, c, t0); !ok {
		t.Fatal("c refused")
	}
	if l.Clients() != 2 {
		t.Errorf("Clients = %d, want 2", l.Clients())
	}
	if ok, _ := l.Allow("h", cfg, a, t0); !ok {
		t.Error("a's bucket was not the one evicted")
	}
	// IPv6 addresses of one /64 share a bucket.
	l = New(0)
	if ok, _ := l.Allow("h", cfg, netip.MustParseAddr("2001:db8:1:2::1"), t0); !ok {
		t.Fatal("first IPv6 call refused")
	}
	if ok, _ := l.Allow("h", cfg, netip.MustParseAddr("2001:db8:1:2:ffff::9"), t0); ok {
		t.Error("two addresses of one /64 have two buckets")
	}
	if ok, _ := l.Allow("h", cfg, netip.MustParseAddr("2001:db8:1:3::1"), t0); !ok {
		t.Error("another /64 shares the bucket")
	}
}

func TestLimiters_Concurrent(t *testing.T) {
	t.Parallel()
	l := New(64)
	cfg := webhooks.RateLimit{Rate: 1, Burst: 100, PerClient: true}
	shared := webhooks.RateLimit{Rate: 1, Burst: 100}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				addr := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", g, i%100))
				l.Allow("h", cfg, addr, t0)
				if ok, _ := l.Allow("shared", shared, addr, t0); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 100 {
		t.Errorf("%d calls allowed through a burst of 100", allowed)
	}
	if n := l.Clients(); n > 64 {
		t.Errorf("Clients = %d above the bound 64", n)
	}
}

func BenchmarkLimiters_Allow(b *testing.B) {
	l := New(0)
	cfg := webhooks.RateLimit{Rate: 1e6, Burst: 1e6, PerClient: true}
	a := netip.MustParseAddr("192.0.2.1")
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		l.Allow("h", cfg, a, now)
	}
}
