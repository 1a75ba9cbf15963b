package intake

import (
	"crypto/rand"
	"sync"
)

// randomChunkLen is how many random bytes a randomSource reads from
// crypto/rand at a time: the random bits of 64 events.
const randomChunkLen = 64 * randomLen

// randomSource hands out bytes of crypto/rand in small pieces: each call
// takes fresh bytes, never given before, from chunks read ahead, since one
// read per event (32 bytes) cost more than the rest of the event's id and
// traceparent. The zero value is ready.
type randomSource struct {
	chunks sync.Pool // of *randomChunk
}

// randomChunk is random bytes of which the first used are given out.
type randomChunk struct {
	b    [randomChunkLen]byte
	used int
}

// read fills p with random bytes; len(p) is at most randomChunkLen.
func (s *randomSource) read(p []byte) {
	c, _ := s.chunks.Get().(*randomChunk)
	if c == nil {
		c = &randomChunk{used: randomChunkLen}
	}
	if c.used+len(p) > len(c.b) {
		rand.Read(c.b[:])
		c.used = 0
	}
	c.used += copy(p, c.b[c.used:])
	s.chunks.Put(c)
}
