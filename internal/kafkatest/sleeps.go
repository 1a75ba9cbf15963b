package kafkatest

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// ErrStopped is SleepControl's error for a request slept when the broker
// stopped.
var ErrStopped = errors.New("kafkatest: broker stopped")

// SleepControl sleeps the request of the running control function (see
// kfake's Cluster.ControlKey) until wakeup returns, as the cluster's
// SleepControl does, or until the broker stops: it then returns ErrStopped,
// which the control function returns (with true), and the broker drops the
// connection without answering, as a broker that dies does. Control
// functions of tests sleep with this method, never with the cluster's own.
//
// Stop wakes the sleeping requests and waits until the broker has taken
// them back before it closes the cluster: kfake's Close does not wait for a
// request being woken, and a request woken while the cluster closes
// deadlocks the cluster's loop (its control function, let go by the close,
// takes the control lock that the loop, still resuming the request, then
// waits for), whose goroutine then outlives the test.
func (b *Broker) SleepControl(wakeup func()) error {
	stopping, ok := b.sleeps.add()
	if !ok {
		return ErrStopped
	}
	defer b.sleeps.done()
	woken := make(chan struct{})
	go func() {
		defer close(woken)
		wakeup()
	}()
	b.c.SleepControl(func() {
		select {
		case <-woken:
		case <-stopping:
		}
	})
	select {
	case <-stopping:
		return ErrStopped
	default:
		return nil
	}
}

// sleeps counts the requests a running cluster sleeps, and wakes them when
// it stops.
type sleeps struct {
	mu       sync.Mutex
	stopping chan struct{} // closed by stop
	asleep   sync.WaitGroup
}

// start makes ready for a newly started cluster.
func (s *sleeps) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = make(chan struct{})
}

// add counts a request about to sleep; it returns false once stop began.
func (s *sleeps) add() (stopping <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopping:
		return nil, false
	default:
	}
	s.asleep.Add(1)
	return s.stopping, true
}

// done counts a request the cluster took back.
func (s *sleeps) done() { s.asleep.Done() }

// stop wakes the sleeping requests and waits until the cluster took them
// back.
func (s *sleeps) stop(t testing.TB) {
	s.mu.Lock()
	close(s.stopping)
	s.mu.Unlock()
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		s.asleep.Wait()
	}()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Errorf("kafkatest: the broker did not take back its slept requests within 10s")
	}
}
