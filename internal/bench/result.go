package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is the summary of a run. Its JSON form is what `squall bench
// webhook --json` prints; the field names are stable (docs/BENCHMARKS.md).
type Result struct {
	// URL is the target, its query values replaced by REDACTED.
	URL    string `json:"url"`
	Method string `json:"method"`
	// Connections is the number of connections the run used.
	Connections int `json:"connections"`
	// Rate is the target of requests per second; 0 without one.
	Rate int64 `json:"rate"`
	// LatencyFrom is "intended" with a rate (latencies are measured from
	// the time each request was due) and "sent" without one.
	LatencyFrom string `json:"latency_from"`
	// DurationSeconds runs from the start to the last answer.
	DurationSeconds float64 `json:"duration_seconds"`
	// Scheduled is, with a rate, the number of requests due within the
	// duration (and --requests); 0 without a rate.
	Scheduled uint64 `json:"scheduled"`
	// Sent is the number of requests started: Answered + Errors.
	Sent uint64 `json:"sent"`
	// Missed is Scheduled - Sent with a rate: the requests the run could
	// not start in time because every connection was waiting.
	Missed uint64 `json:"missed"`
	// Answered is the number of HTTP answers, whatever their status.
	Answered uint64 `json:"answered"`
	// Non2xx is the number of answers whose status is not 2xx.
	Non2xx uint64 `json:"non_2xx"`
	// Errors is the number of requests without an answer.
	Errors uint64 `json:"errors"`
	// Connects is the number of connections opened.
	Connects uint64 `json:"connects"`
	// Throughput is answers per second over DurationSeconds.
	Throughput float64 `json:"throughput"`
	// LatencyMs summarizes the latencies of the answers, in milliseconds.
	LatencyMs Latency `json:"latency_ms"`
	// Status counts the answers by status code ("200": n); codes outside
	// 0-599 count under "0".
	Status map[string]uint64 `json:"status"`
	// ErrorKinds counts the requests without an answer by kind
	// (connect_refused, connect, timeout, reset, closed, other,
	// interrupted); kinds that did not happen are left out.
	ErrorKinds map[string]uint64 `json:"errors_by_kind"`
	// ClientCPUSeconds is the CPU time (user and system) the load
	// generator's whole process used during the run, and
	// ClientCPUMicrosPerAnswer the same per answer. On a machine shared
	// with the target they tell how much of the CPU the load itself took
	// (`squall bench findings` with --readers runs two loads in one
	// process: each reports the process's CPU over its own run). Absent
	// where the platform does not report it.
	ClientCPUSeconds         float64 `json:"client_cpu_seconds,omitempty"`
	ClientCPUMicrosPerAnswer float64 `json:"client_cpu_us_per_answer,omitempty"`
}

// Latency summarizes latencies, in milliseconds.
type Latency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// result sums the shards' counts.
func (l *Load) result(sched *schedule, shards []shard, elapsed, cpu time.Duration) *Result {
	r := &Result{
		URL:             Redact(l.cfg.URL),
		Method:          l.cfg.Method,
		Connections:     l.cfg.Connections,
		Rate:            l.cfg.Rate,
		LatencyFrom:     "sent",
		DurationSeconds: elapsed.Seconds(),
		Status:          map[string]uint64{},
		ErrorKinds:      map[string]uint64{},
	}
	if l.cfg.Rate > 0 {
		r.LatencyFrom = "intended"
		r.Scheduled = uint64(sched.scheduled())
	}
	var h Histogram
	for i := range shards {
		s := &shards[i]
		h.Merge(&s.latency)
		r.Sent += s.sent.Load()
		r.Connects += s.connects.Load()
		for code := range s.status {
			if n := s.status[code].Load(); n > 0 {
				r.Status[strconv.Itoa(code)] += n
				r.Answered += n
				if code < 200 || code > 299 {
					r.Non2xx += n
				}
			}
		}
		for k := range s.errors {
			if n := s.errors[k].Load(); n > 0 {
				r.ErrorKinds[kindNames[k]] += n
				r.Errors += n
			}
		}
	}
	if r.Scheduled > r.Sent {
		r.Missed = r.Scheduled - r.Sent
	}
	if elapsed > 0 {
		r.Throughput = float64(r.Answered) / elapsed.Seconds()
	}
	if cpu > 0 {
		r.ClientCPUSeconds = cpu.Seconds()
		if r.Answered > 0 {
			r.ClientCPUMicrosPerAnswer = float64(cpu.Microseconds()) / float64(r.Answered)
		}
	}
	r.LatencyMs = Latency{
		Min: millis(h.Min()), Mean: millis(h.Mean()), Max: millis(h.Max()),
		P50: millis(h.Quantile(0.5)), P90: millis(h.Quantile(0.9)),
		P99: millis(h.Quantile(0.99)), P999: millis(h.Quantile(0.999)),
	}
	return r
}

// WriteText writes the summary as a table for people.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	row := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s %s\n", label, fmt.Sprintf(format, args...))
	}
	row("target", "%s %s", r.Method, r.URL)
	if r.Rate > 0 {
		row("load", "%d connections, %d requests/s target (latency from the time each request was due)", r.Connections, r.Rate)
	} else {
		row("load", "%d connections, as fast as answers come (latency from the send)", r.Connections)
	}
	row("duration", "%.2f s", r.DurationSeconds)
	if r.Rate > 0 {
		row("requests", "%d scheduled, %d sent, %d missed", r.Scheduled, r.Sent, r.Missed)
	} else {
		row("requests", "%d sent", r.Sent)
	}
	row("answers", "%d (%d not 2xx), %.1f answers/s", r.Answered, r.Non2xx, r.Throughput)
	l := r.LatencyMs
	row("latency ms", "min %.3f  mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f",
		l.Min, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
	row("status", "%s", counts(r.Status))
	row("errors", "%d without an answer%s", r.Errors, prefixed(counts(r.ErrorKinds)))
	row("connects", "%d", r.Connects)
	if r.ClientCPUSeconds > 0 {
		row("client CPU", "%.2f s, %.1f µs per answer (this load generator's own)", r.ClientCPUSeconds, r.ClientCPUMicrosPerAnswer)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// counts formats a map of counts as "k: n, k: n" in key order, or "none".
func counts(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// prefixed returns ": " + s, or "" when s is "none".
func prefixed(s string) string {
	if s == "none" {
		return ""
	}
	return ": " + s
}
