package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// takeAll takes requests from s until it is over and returns their due
// times, checking that each is returned at or after its due time.
func takeAll(t *testing.T, ctx context.Context, s *schedule) []time.Time {
	t.Helper()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var dues []time.Time
	for {
		due, ok := s.take(ctx, timer)
		if !ok {
			return dues
		}
		if now := time.Now(); now.Before(due) {
			t.Fatalf("request %d returned at %v, before it is due at %v", len(dues), now, due)
		}
		dues = append(dues, due)
	}
}

func TestSchedule_rate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := newSchedule(start, time.Second, 300, 0)
		dues := takeAll(t, t.Context(), s)
		if len(dues) != 300 || s.scheduled() != 300 {
			t.Fatalf("%d requests taken, %d scheduled, want 300", len(dues), s.scheduled())
		}
		for k, due := range dues {
			// 1 s / 300 is not a whole number of nanoseconds: each due
			// time is rounded down, and not drifting.
			if want := start.Add(time.Duration(int64(k) * int64(time.Second) / 300)); !due.Equal(want) {
				t.Fatalf("request %d due at %v, want %v", k, due.Sub(start), want.Sub(start))
			}
		}
		// A waiting connection returns exactly when its request falls due.
		if got := time.Since(start); got != dues[len(dues)-1].Sub(start) {
			t.Errorf("the last request returned %v after the start, due %v", got, dues[len(dues)-1].Sub(start))
		}
	})
}

// TestSchedule_behind checks the open loop: when the connections fall
// behind, the next requests are returned at once with their own due times
// (in the past), from which their latency is measured.
func TestSchedule_behind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := newSchedule(start, time.Second, 100, 0)
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		if due, ok := s.take(t.Context(), timer); !ok || !due.Equal(start) {
			t.Fatalf("first request due %v, %t", due, ok)
		}
		time.Sleep(95 * time.Millisecond) // a stalled answer
		for k := 1; k <= 9; k++ {
			due, ok := s.take(t.Context(), timer)
			if !ok || !due.Equal(start.Add(time.Duration(k)*10*time.Millisecond)) || time.Since(start) != 95*time.Millisecond {
				t.Fatalf("request %d: due %v, returned at %v, %t", k, due.Sub(start), time.Since(start), ok)
			}
		}
		// Request 10 is not due yet: wait for it.
		if due, ok := s.take(t.Context(), timer); !ok || due.Sub(start) != 100*time.Millisecond || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("request 10: due %v, returned at %v, %t", due.Sub(start), time.Since(start), ok)
		}
		// Past the end, requests still due are not sent (missed).
		time.Sleep(time.Second)
		if _, ok := s.take(t.Context(), timer); ok {
			t.Fatal("a request was taken after the end")
		}
		if s.scheduled() != 100 {
			t.Fatalf("scheduled %d, want 100", s.scheduled())
		}
	})
}

func TestSchedule_limits(t *testing.T) {
	t.Run("requests with a rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s := newSchedule(start, time.Minute, 10, 25)
			if dues := takeAll(t, t.Context(), s); len(dues) != 25 || s.scheduled() != 25 || time.Since(start) != 2400*time.Millisecond {
				t.Fatalf("%d taken, %d scheduled, over %v; want 25 over 2.4s", len(dues), s.scheduled(), time.Since(start))
			}
		})
	})
	t.Run("requests without a rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSchedule(time.Now(), time.Minute, 0, 7)
			if dues := takeAll(t, t.Context(), s); len(dues) != 7 || s.scheduled() != 0 {
				t.Fatalf("%d taken, %d scheduled; want 7 and 0", len(dues), s.scheduled())
			}
		})
	})
	t.Run("duration without a rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s := newSchedule(start, time.Second, 0, 0)
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			n := 0
			for {
				due, ok := s.take(t.Context(), timer)
				if !ok {
					break
				}
				if !due.Equal(time.Now()) {
					t.Fatalf("due %v, now %v: without a rate a request is due when taken", due, time.Now())
				}
				n++
				time.Sleep(100 * time.Millisecond) // the answer
			}
			if n != 10 || time.Since(start) != time.Second {
				t.Fatalf("%d requests over %v, want 10 over 1s", n, time.Since(start))
			}
		})
	})
	t.Run("fractional rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSchedule(time.Now(), 1500*time.Millisecond, 3, 0)
			// Due at 0, 333ms, 666ms, 1s, 1.333s.
			if dues := takeAll(t, t.Context(), s); len(dues) != 5 || s.scheduled() != 5 {
				t.Fatalf("%d taken, %d scheduled; want 5", len(dues), s.scheduled())
			}
		})
	})
	t.Run("interrupted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			s := newSchedule(start, time.Hour, 1, 0)
			time.AfterFunc(1500*time.Millisecond, cancel)
			if dues := takeAll(t, ctx, s); len(dues) != 2 || time.Since(start) != 1500*time.Millisecond {
				t.Fatalf("%d taken, returned after %v; want 2 and 1.5s", len(dues), time.Since(start))
			}
		})
	})
}
