// Package ratelimit keeps the token buckets of the webhooks' "rate_limit"
// settings: one per webhook, or one per webhook and client address, the
// latter bounded in number (least recently used first out).
package ratelimit

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/squallhq/squall/webhooks"
)

// DefaultMaxClients is the default bound of the per-client buckets, across
// all webhooks. An entry takes about 250 bytes: 65,536 entries ~ 16 MiB.
const DefaultMaxClients = 1 << 16

// Limiters holds the buckets. The zero value is not usable; build it with
// [New]. It is safe for concurrent use.
type Limiters struct {
	maxClients int

	mu      sync.Mutex
	hooks   map[string]*bucket // webhook-wide buckets, by webhook id
	clients map[clientKey]*list.Element
	lru     list.List // of *clientEntry, most recently used first
}

// bucket is a limiter and the setting it was built from: a changed setting
// (a reloaded file) starts a new bucket.
type bucket struct {
	cfg webhooks.RateLimit
	lim *rate.Limiter
}

type clientKey struct {
	webhook string
	addr    netip.Addr
}

type clientEntry struct {
	key clientKey
	bucket
}

// New returns empty Limiters that keep at most maxClients per-client buckets
// (DefaultMaxClients when maxClients ≤ 0).
func New(maxClients int) *Limiters {
	if maxClients <= 0 {
		maxClients = DefaultMaxClients
	}
	return &Limiters{maxClients: maxClients, hooks: make(map[string]*bucket), clients: make(map[clientKey]*list.Element)}
}

// Allow takes one call from the bucket of webhook id (its setting cfg) and,
// with cfg.PerClient, of the client address. It returns true when the call
// may go on; otherwise it takes nothing and returns how long until a call
// would be allowed. IPv6 clients share a bucket per /64, the block a
// single host usually has.
func (l *Limiters) Allow(id string, cfg webhooks.RateLimit, client netip.Addr, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	var lim *rate.Limiter
	if cfg.PerClient {
		lim = l.client(clientKey{id, clientPrefix(client)}, cfg)
	} else {
		b := l.hooks[id]
		if b == nil || b.cfg != cfg {
			b = &bucket{cfg: cfg, lim: newLimiter(cfg)}
			l.hooks[id] = b
		}
		lim = b.lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return true, 0
	}
	r.CancelAt(now)
	return false, d
}

// Clients returns the number of per-client buckets kept.
func (l *Limiters) Clients() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// client returns the bucket of key, making it the most recently used. mu
// is held.
func (l *Limiters) client(key clientKey, cfg webhooks.RateLimit) *rate.Limiter {
	if e, ok := l.clients[key]; ok {
		l.lru.MoveToFront(e)
		ce := e.Value.(*clientEntry)
		if ce.cfg != cfg {
			ce.bucket = bucket{cfg: cfg, lim: newLimiter(cfg)}
		}
		return ce.lim
	}
	if len(l.clients) >= l.maxClients {
		oldest := l.lru.Back()
		delete(l.clients, oldest.Value.(*clientEntry).key)
		l.lru.Remove(oldest)
	}
	ce := &clientEntry{key: key, bucket: bucket{cfg: cfg, lim: newLimiter(cfg)}}
	l.clients[key] = l.lru.PushFront(ce)
	return ce.lim
}

func newLimiter(cfg webhooks.RateLimit) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(cfg.Rate), max(cfg.Burst, 1))
}

// clientPrefix returns the address a client's bucket is keyed by: an IPv4
// address itself, the first 64 bits of an IPv6 address.
func clientPrefix(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, err := a.WithZone("").Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}
