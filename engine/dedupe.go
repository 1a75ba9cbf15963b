package engine

import (
	"hash/fnv"
	"sync"
	"time"
)

// dedupeWindow remembers the ids of the events processed recently, at most
// size of them and none older than maxAge (0: no age limit), forgetting the
// oldest first. Ids are kept as 16 bytes: a UUID (the satellite's UUIDv7)
// as its own bytes, anything else as its FNV-128a hash.
type dedupeWindow struct {
	size   int
	maxAge time.Duration
	start  time.Time // origin of the entries' times (monotonic)

	mu   sync.Mutex
	set  map[eventKey]struct{}
	ring []dedupeEntry // oldest at head
	head int
	n    int
}

type eventKey [16]byte

type dedupeEntry struct {
	key eventKey
	at  time.Duration // since start
}

// newDedupeWindow returns a window; size 0 makes a window that remembers
// nothing.
func newDedupeWindow(size int, maxAge time.Duration) *dedupeWindow {
	return &dedupeWindow{
		size:   size,
		maxAge: maxAge,
		start:  time.Now(),
		set:    make(map[eventKey]struct{}, min(size, 1<<16)),
		ring:   make([]dedupeEntry, size),
	}
}

// key returns the key of id, and false when the window ignores id (it
// remembers nothing, or id is empty).
func (d *dedupeWindow) key(id []byte) (eventKey, bool) {
	if d.size == 0 || len(id) == 0 {
		return eventKey{}, false
	}
	return keyOf(id), true
}

// seen reports whether id is in the window.
func (d *dedupeWindow) seen(id []byte) bool {
	k, ok := d.key(id)
	return ok && d.seenKey(k)
}

// seenKey reports whether the id of key k (from key) is in the window.
func (d *dedupeWindow) seenKey(k eventKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(time.Since(d.start))
	_, ok := d.set[k]
	return ok
}

// add puts id in the window, forgetting the oldest id if it is full.
func (d *dedupeWindow) add(id []byte) {
	if k, ok := d.key(id); ok {
		d.addKey(k)
	}
}

// addKey puts the id of key k (from key) in the window.
func (d *dedupeWindow) addKey(k eventKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Since(d.start)
	d.expire(now)
	if _, ok := d.set[k]; ok {
		return
	}
	if d.n == d.size {
		d.drop()
	}
	d.ring[(d.head+d.n)%d.size] = dedupeEntry{key: k, at: now}
	d.n++
	d.set[k] = struct{}{}
}

// len returns the number of ids in the window.
func (d *dedupeWindow) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// expire forgets the ids older than maxAge.
func (d *dedupeWindow) expire(now time.Duration) {
	if d.maxAge <= 0 {
		return
	}
	for d.n > 0 && now-d.ring[d.head].at > d.maxAge {
		d.drop()
	}
}

// drop forgets the oldest id.
func (d *dedupeWindow) drop() {
	delete(d.set, d.ring[d.head].key)
	d.ring[d.head] = dedupeEntry{}
	d.head = (d.head + 1) % d.size
	d.n--
}

// keyOf returns the key of an event id.
func keyOf(id []byte) eventKey {
	if k, ok := parseUUID(id); ok {
		return k
	}
	h := fnv.New128a()
	h.Write(id)
	var k eventKey
	h.Sum(k[:0])
	return k
}

// parseUUID parses the canonical form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
// (either letter case).
func parseUUID(s []byte) (eventKey, bool) {
	var k eventKey
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return k, false
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return k, false
		}
		k[j] = hi<<4 | lo
		j++
		i += 2
	}
	return k, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
