package intake

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
)

// randomSource hands out random bytes for event ids and trace ids from
// ChaCha8 generators (math/rand/v2's, cryptographically strong), each
// seeded from crypto/rand and used by one call at a time: one crypto/rand
// read per event (32 bytes) cost more than the rest of the event's id and
// traceparent. The zero value is ready.
type randomSource struct {
	gens sync.Pool // of *rand.ChaCha8
}

// read fills p with random bytes.
func (s *randomSource) read(p []byte) {
	g, _ := s.gens.Get().(*rand.ChaCha8)
	if g == nil {
		var seed [32]byte
		crand.Read(seed[:])
		g = rand.NewChaCha8(seed)
	}
	_, _ = g.Read(p)
	s.gens.Put(g)
}
