package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// schedule hands out the requests of a run to the connections: each
// request's number and the time it is meant to be sent. With a rate the
// load is open-loop: request k is due at start + k/rate whatever became of
// the earlier ones, and its latency is measured from that time, so that a
// stalled target is charged for the requests it kept waiting (coordinated
// omission). Without a rate each request is due when a connection takes it.
type schedule struct {
	start time.Time
	end   time.Time       // no request is sent at or after end
	rate  int64           // requests per second; 0 for as fast as answers come
	limit int64           // requests in all; 0 for no limit
	stop  <-chan struct{} // ends the run once closed; nil for never
	next  atomic.Int64
}

func newSchedule(start time.Time, duration time.Duration, rate, limit int64) *schedule {
	return &schedule{start: start, end: start.Add(duration), rate: rate, limit: limit}
}

// due returns the time request k is due at, with a rate.
func (s *schedule) due(k int64) time.Time {
	sec, rest := k/s.rate, k%s.rate
	return s.start.Add(time.Duration(sec)*time.Second + time.Duration(rest*int64(time.Second)/s.rate))
}

// scheduled returns how many requests fall due before the end: those the
// run means to send. It is 0 without a rate (as many as are answered).
func (s *schedule) scheduled() int64 {
	if s.rate == 0 {
		return 0
	}
	d := s.end.Sub(s.start)
	n := int64(d/time.Second)*s.rate + (int64(d%time.Second)*s.rate+int64(time.Second)-1)/int64(time.Second)
	// The due times are rounded down to the nanosecond: adjust to them.
	for n > 0 && !s.due(n-1).Before(s.end) {
		n--
	}
	for s.due(n).Before(s.end) {
		n++
	}
	if s.limit > 0 {
		n = min(n, s.limit)
	}
	return n
}

// take returns the next request's due time once it has come, using timer
// (owned by the caller, stopped) to wait. It returns false when the run is
// over: the limit is reached, the end has come, stop is closed or ctx is
// done.
func (s *schedule) take(ctx context.Context, timer *time.Timer) (time.Time, bool) {
	if ctx.Err() != nil {
		return time.Time{}, false
	}
	select {
	case <-s.stop:
		return time.Time{}, false
	default:
	}
	k := s.next.Add(1) - 1
	if s.limit > 0 && k >= s.limit {
		return time.Time{}, false
	}
	now := time.Now()
	if s.rate == 0 {
		return now, now.Before(s.end)
	}
	due := s.due(k)
	if !due.Before(s.end) || !now.Before(s.end) {
		return time.Time{}, false
	}
	if wait := due.Sub(now); wait > 0 {
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return time.Time{}, false
		case <-s.stop:
			timer.Stop()
			return time.Time{}, false
		}
	}
	return due, true
}
