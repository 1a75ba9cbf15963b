package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// MasterURLs are the base URLs of the masters (http://host:port). Any
	// master takes a heartbeat (followers forward it to the leader); the
	// reporter sends to the one that last took one and moves to the next
	// when it fails.
	MasterURLs []string
	// Token is the bearer token; it needs fleet_report on the root.
	Token string
	// Client sends the heartbeats (for TLS to the masters); nil is a
	// plain client. Its redirects are followed (Go drops the token when
	// one leaves the host, and the master then answers 401).
	Client *http.Client
	// Interval is the time between two heartbeats (default 10s; the
	// masters mark a member stale after 30s).
	Interval time.Duration
	// Timeout bounds one request (default: Interval, at most 5s).
	Timeout time.Duration
	// MaxBackoff caps the wait after failures (default 1 min): after a
	// round in which every master failed, the reporter waits 1s, 2s,
	// 4s, … up to MaxBackoff (with ±20% jitter), then Interval again once
	// a heartbeat went through.
	MaxBackoff time.Duration
	// Logger receives the reporter's logs; nil discards them.
	Logger *slog.Logger
	// Registerer, when set, receives squall_fleet_heartbeats_total.
	Registerer prometheus.Registerer
}

// Default reporter settings.
const (
	DefaultReportInterval = 10 * time.Second
	defaultMaxBackoff     = time.Minute
	maxRequestTimeout     = 5 * time.Second
	firstBackoff          = time.Second
)

// Reporter sends the heartbeats of an engine or a satellite to the
// masters, in its own goroutine: a slow or unreachable master delays only
// the next heartbeat, never the work of the process that reports.
type Reporter struct {
	cfg    ReporterConfig
	status func() Report
	log    *slog.Logger
	sent   *prometheus.CounterVec
	cur    int // the master tried first
}

// NewReporter returns a reporter of the reports status returns; status is
// called once per heartbeat and must be fast (it reads the process's
// state, it does not wait for it).
func NewReporter(cfg ReporterConfig, status func() Report) (*Reporter, error) {
	errs := CheckMasterURLs(cfg.MasterURLs)
	if cfg.Token == "" {
		errs = append(errs, errors.New("no token"))
	}
	if status == nil {
		errs = append(errs, errors.New("no status function"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("fleet reporter: %w", errors.Join(errs...))
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultReportInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = min(cfg.Interval, maxRequestTimeout)
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.MasterURLs = slices.Clone(cfg.MasterURLs)
	for i, u := range cfg.MasterURLs {
		cfg.MasterURLs[i] = strings.TrimRight(u, "/")
	}
	r := &Reporter{cfg: cfg, status: status, log: cfg.Logger.With("component", "fleet-reporter"),
		sent: metricset.CounterVec("squall_fleet_heartbeats_total", "Fleet heartbeats sent to the masters, by result: ok, or error when every master failed.", "result")}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.sent); err != nil {
			return nil, fmt.Errorf("fleet reporter metrics: %w", err)
		}
	}
	return r, nil
}

// CheckMasterURLs says what is wrong with the masters' base URLs of a
// process that talks to them: none, or one that is not http(s)://host.
func CheckMasterURLs(urls []string) []error {
	var errs []error
	if len(urls) == 0 {
		errs = append(errs, errors.New("no master URL"))
	}
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("master URL %q: want http(s)://host:port", u))
		}
	}
	return errs
}

// Backoff returns the wait after the n-th failed round in a row (n ≥ 1),
// without jitter: 1s, 2s, 4s, … capped at max (and never below 1s or
// the interval when that is shorter).
func Backoff(n int, interval, max time.Duration) time.Duration {
	d := min(firstBackoff, interval)
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Run sends a heartbeat every Interval until ctx ends; it returns nil.
func (r *Reporter) Run(ctx context.Context) error {
	failures := 0
	var lastWarn time.Time
	var lastErr string
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		rep := r.status()
		master, err := r.send(ctx, rep)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.cfg.Interval
		if err == nil {
			r.sent.WithLabelValues("ok").Inc()
			if failures > 0 {
				r.log.Info("fleet heartbeat delivered again", "master", master, "failed_rounds", failures)
			} else {
				r.log.Debug("fleet heartbeat delivered", "master", master)
			}
			failures = 0
		} else {
			r.sent.WithLabelValues("error").Inc()
			failures++
			wait = jitter(Backoff(failures, r.cfg.Interval, r.cfg.MaxBackoff))
			// One warning when the heartbeats start failing or fail
			// differently, then one a minute: a master down for an
			// hour adds sixty lines, not one per retry.
			if msg := err.Error(); failures == 1 || msg != lastErr || time.Since(lastWarn) >= time.Minute {
				r.log.Warn("fleet heartbeat failed on every master; the process works on, only the masters' fleet list misses it",
					"err", msg, "failed_rounds", failures, "retry_in", wait.Round(time.Millisecond).String())
				lastWarn, lastErr = time.Now(), msg
			} else {
				r.log.Debug("fleet heartbeat failed", "err", msg, "failed_rounds", failures)
			}
		}
		timer.Reset(wait)
	}
}

// jitter spreads d by ±20%, so that many processes that lost the same
// master do not retry in step.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// send tries each master once, from the one that last took a heartbeat,
// and returns the URL of the one that took it, or why each failed.
func (r *Reporter) send(ctx context.Context, rep Report) (string, error) {
	body, err := json.Marshal(rep)
	if err != nil {
		return "", fmt.Errorf("encode heartbeat: %w", err)
	}
	n := len(r.cfg.MasterURLs)
	var errs []string
	for k := range n {
		i := (r.cur + k) % n
		base := r.cfg.MasterURLs[i]
		err := r.put(ctx, base+Pattern+"/"+url.PathEscape(rep.Role)+"/"+url.PathEscape(rep.ID), body)
		if err == nil {
			r.cur = i
			return base, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		errs = append(errs, base+": "+err.Error())
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// put sends one heartbeat and explains a refusal.
func (r *Reporter) put(ctx context.Context, u string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			// The URL is in the message already.
			return ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		return fmt.Errorf("answered %s", resp.Status)
	}
	err = fmt.Errorf("answered %d %s: %s", resp.StatusCode, e.Code, e.Message)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		err = fmt.Errorf("%w (the heartbeat token needs fleet_report on the root: squall token --auth fleet=root:fleet_report)", err)
	}
	return err
}
