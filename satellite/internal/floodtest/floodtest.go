// Package floodtest sends a flood of large webhook calls at once, for the
// tests of the intake's bounds (docs/operations.md, "Bounds of the
// intake"): many clients, each calling until it is answered 200 or runs out
// of attempts, and what each call was answered.
package floodtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Config describes a flood.
type Config struct {
	// URL is the webhook's URL, token included.
	URL string
	// Clients call at once, each up to Attempts times, until a call is
	// answered 200.
	Clients, Attempts int
	// BodySize is the size of the pad of each body.
	BodySize int
}

// Outcome is what one call was answered.
type Outcome struct {
	// Status is the answer's status.
	Status int
	// EventID is the event id of a 200, Code the error code of another
	// answer.
	EventID, Code string
	// RetryAfter is the answer's Retry-After header.
	RetryAfter string
	// Err is set when the call failed without an answer.
	Err error
}

// Flood is a running flood.
type Flood struct {
	baseline uint64 // heap in use before the clients started
	settled  chan struct{}
	outcomes chan Outcome
	wg       sync.WaitGroup
}

// Start measures the heap in use (for HeapGrowth), then starts the clients
// of cfg, calling through client.
func Start(client *http.Client, cfg Config) *Flood {
	f := &Flood{settled: make(chan struct{}, cfg.Clients), outcomes: make(chan Outcome, cfg.Clients*cfg.Attempts)}
	// One pad shared by every call: the clients hold no copy of it.
	pad := bytes.Repeat([]byte("p"), cfg.BodySize)
	f.baseline = heapInUse()
	for c := range cfg.Clients {
		f.wg.Go(func() {
			defer func() { f.settled <- struct{}{} }()
			for attempt := range cfg.Attempts {
				head, tail := fmt.Sprintf(`{"n": %d, "pad": "`, c*cfg.Attempts+attempt), `"}`
				req, _ := http.NewRequest(http.MethodPost, cfg.URL, io.MultiReader(strings.NewReader(head), bytes.NewReader(pad), strings.NewReader(tail)))
				req.ContentLength = int64(len(head) + len(pad) + len(tail))
				o := call(client, req)
				f.outcomes <- o
				if o.Err != nil || o.Status == http.StatusOK {
					return
				}
			}
		})
	}
	return f
}

// call makes one call of the flood.
func call(client *http.Client, req *http.Request) Outcome {
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{Err: err}
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ans struct {
		EventID string `json:"event_id"`
		Code    string `json:"code"`
	}
	_ = json.Unmarshal(raw, &ans)
	return Outcome{Status: resp.StatusCode, EventID: ans.EventID, Code: ans.Code, RetryAfter: resp.Header.Get("Retry-After")}
}

// Settled receives once for each client that is done: answered 200, out of
// attempts, or failed.
func (f *Flood) Settled() <-chan struct{} { return f.settled }

// Wait waits for every client and returns the outcomes of all the calls.
func (f *Flood) Wait() []Outcome {
	f.wg.Wait()
	close(f.outcomes)
	var all []Outcome
	for o := range f.outcomes {
		all = append(all, o)
	}
	return all
}

// Tally returns the event ids of the calls answered 200 and the number of
// calls refused with a 503 of code refusal and Retry-After retryAfter; it
// fails the test for any other outcome.
func Tally(t testing.TB, outcomes []Outcome, refusal, retryAfter string) (acked []string, refused int) {
	t.Helper()
	for _, o := range outcomes {
		switch {
		case o.Err != nil:
			t.Errorf("call failed: %v", o.Err)
		case o.Status == http.StatusOK:
			acked = append(acked, o.EventID)
		case o.Status == http.StatusServiceUnavailable && o.Code == refusal && o.RetryAfter == retryAfter:
			refused++
		default:
			t.Errorf("answer %d %q (Retry-After %q), want 200 or 503 %s with Retry-After %s", o.Status, o.Code, o.RetryAfter, refusal, retryAfter)
		}
	}
	return acked, refused
}

// HeapGrowth returns by how many bytes the heap in use, after a garbage
// collection, grew since Start.
func (f *Flood) HeapGrowth() int64 { return int64(heapInUse()) - int64(f.baseline) }

// heapInUse returns the bytes of heap in use after a garbage collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
