package kafkatest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// HoldProduce makes the broker hold the next produce request it receives,
// as a slow broker would, until release is called: held is closed once the
// broker holds it. The produce requests after it are handled as usual
// (kafka-go sends them on other connections). release may be called more
// than once; the request is released at the end of the test at the latest.
// A broker stopped while it holds the request drops its connection.
//
// Holds taken one after the other hold the requests in that order: the
// second hold takes the first request the first hold lets pass.
func (b *Broker) HoldProduce(t testing.TB) (held <-chan struct{}, release func()) {
	heldCh, releaseCh := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(releaseCh) }) }
	t.Cleanup(release)
	// Not a sync.Once: a request after the held one must not wait for
	// it, which sleeps inside the broker's loop.
	var holding atomic.Bool
	b.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if holding.CompareAndSwap(false, true) {
			close(heldCh)
			if err := b.SleepControl(func() { <-releaseCh }); err != nil {
				return nil, err, true
			}
		}
		return nil, nil, false
	})
	return heldCh, release
}
