// Package webhookload sends webhooks to satellites at a steady pace, as
// the end-to-end tests of squall do (TestDistributed and the robustness
// suite's TestPipeline), and counts what the satellites acknowledged.
package webhookload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a load's pace and bounds, and what it sends.
type Config struct {
	// Interval is the time between two calls to one satellite.
	Interval time.Duration
	// InFlight bounds the calls in flight to one satellite.
	InFlight int
	// MaxPerSatellite bounds the calls to one satellite whatever happens.
	MaxPerSatellite int
	// HooksPerSatellite is how many webhooks each satellite has: those of
	// satellite s are HookID(s, 0), HookID(s, 1)…, called in turn.
	HooksPerSatellite int
	// CallTimeout bounds each call.
	CallTimeout time.Duration
	// Token returns a webhook's token.
	Token func(hook string) string
	// Acked, when set, is told each acknowledged call: the id its body
	// carries and the event id of the answer.
	Acked func(id, eventID string)
}

// HookID names webhook h of satellite s.
func HookID(s, h int) string { return fmt.Sprintf("s%d-h%d", s, h) }

// Load sends the webhooks and records which were acknowledged.
type Load struct {
	cfg    Config
	client *http.Client
	sent   atomic.Int64
	acked  atomic.Int64

	mu       sync.Mutex
	ackedIDs map[string]bool
	failures map[string]int // status or error kind → count
}

// New returns a Load that sends as cfg says.
func New(cfg Config) *Load {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.InFlight
	return &Load{
		cfg:      cfg,
		client:   &http.Client{Transport: tr, Timeout: cfg.CallTimeout},
		ackedIDs: map[string]bool{},
		failures: map[string]int{},
	}
}

// Sent is the number of calls sent.
func (l *Load) Sent() int64 { return l.sent.Load() }

// Acked is the number of calls acknowledged.
func (l *Load) Acked() int64 { return l.acked.Load() }

// Send posts webhooks to satellite s (its base URL from base, which may
// change when it restarts), one per Interval, spread over its webhooks,
// until stop is closed, ctx ends or MaxPerSatellite were sent; each
// carries a unique id. It returns once the calls it sent are answered.
func (l *Load) Send(ctx context.Context, s int, base func() string, stop <-chan struct{}) {
	tick := time.NewTicker(l.cfg.Interval)
	defer tick.Stop()
	sem := make(chan struct{}, l.cfg.InFlight)
	var calls sync.WaitGroup
	defer calls.Wait()
	for i := range l.cfg.MaxPerSatellite {
		select {
		case <-tick.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		hook := HookID(s, i%l.cfg.HooksPerSatellite)
		id := fmt.Sprintf("%s-%07d", hook, i)
		l.sent.Add(1)
		url := base() + "/engine/webhook/event/" + hook + "?token=" + l.cfg.Token(hook)
		calls.Go(func() {
			defer func() { <-sem }()
			eventID, failure := l.post(ctx, url, id)
			l.record(id, eventID, failure)
		})
	}
}

// post sends one webhook and returns the event id of its answer, or
// what went wrong.
func (l *Load) post(ctx context.Context, url, id string) (eventID, failure string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"id": %q}`, id)))
	if err != nil {
		return "", "request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return "", "transport error"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return "", strconv.Itoa(resp.StatusCode)
	}
	var answer struct {
		EventID string `json:"event_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&answer); err != nil || answer.EventID == "" {
		return "", "200 without an event id"
	}
	return answer.EventID, ""
}

// record counts a call's outcome.
func (l *Load) record(id, eventID, failure string) {
	if failure != "" {
		l.mu.Lock()
		l.failures[failure]++
		l.mu.Unlock()
		return
	}
	if l.cfg.Acked != nil {
		l.cfg.Acked(id, eventID)
	}
	l.mu.Lock()
	l.ackedIDs[id] = true
	l.mu.Unlock()
	l.acked.Add(1)
}

// AckedIDs returns the ids of the acknowledged calls, sorted.
func (l *Load) AckedIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.ackedIDs))
}

// Failures counts the calls not acknowledged, by outcome.
func (l *Load) Failures() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.failures)
}
