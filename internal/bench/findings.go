package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/master/findings"
)

// MaxPageSize is the largest page the findings API serves.
const MaxPageSize = 1000

// FindingsConfig configures a findings run: credential findings inserted
// and pages of them listed at the same time, on a master's findings API.
type FindingsConfig struct {
	// URL is the master's base URL (http or https, with a host; a path
	// is a prefix the API is mounted under, behind a proxy).
	URL string
	// Token is the bearer token; its tenant receives the findings.
	Token string
	// Connections insert findings; Readers list pages (0: none).
	Connections int
	Readers     int
	// Rate is the target of inserts per second (0: closed loop); the
	// readers always read as fast as they are answered.
	Rate int64
	// Duration bounds the run; Requests bounds the inserts (0: none).
	Duration time.Duration
	Requests int64
	// Timeout bounds each connect and each request.
	Timeout time.Duration
	// PageSize is the limit of each list request; the readers cycle
	// through pages 1 to Pages.
	PageSize int
	Pages    int
	// Progress, when not nil, receives the progress lines of both loads.
	Progress         io.Writer
	ProgressInterval time.Duration
}

// FindingsResult is the summary of a findings run; its JSON form is what
// `squall bench findings --json` prints.
type FindingsResult struct {
	// Run names the run: it is in the user name of every finding it
	// inserted (squall-bench-RUN-N@bench.invalid).
	Run     string  `json:"run"`
	Inserts *Result `json:"inserts"`
	// Pages is absent without readers.
	Pages *Result `json:"pages,omitempty"`
}

// Findings is a configured findings run.
type Findings struct {
	run            string
	inserts, pages *Load
}

// NewFindings validates cfg and builds the two loads. It starts nothing.
func NewFindings(cfg FindingsConfig) (*Findings, error) {
	var errs []error
	add := func(field string, err error) { errs = append(errs, &ConfigError{Field: field, Err: err}) }
	base, err := parseTarget(cfg.URL)
	if err != nil {
		add("url", err)
	} else if base.RawQuery != "" {
		add("url", fmt.Errorf("%q: the master's URL takes no query", Redact(cfg.URL)))
	}
	if cfg.Token == "" || strings.ContainsAny(cfg.Token, "\r\n\x00 ") {
		add("token", errors.New("empty, or holds a space, a line break or a NUL"))
	}
	if cfg.Readers < 0 || cfg.Readers > MaxConnections {
		add("readers", fmt.Errorf("%d is not between 0 and %d", cfg.Readers, MaxConnections))
	}
	if cfg.PageSize < 1 || cfg.PageSize > MaxPageSize {
		add("page_size", fmt.Errorf("%d is not between 1 and %d", cfg.PageSize, MaxPageSize))
	}
	if cfg.Pages < 1 {
		add("pages", fmt.Errorf("%d must be at least 1", cfg.Pages))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var id [4]byte
	_, _ = rand.Read(id[:]) // never fails
	f := &Findings{run: hex.EncodeToString(id[:])}
	prefix := strings.TrimSuffix(base.Path, "/") + findings.Prefix
	auth := []Header{{Name: "Authorization", Value: "Bearer " + cfg.Token}}
	common := func(path, method string, body []byte, conns int, rate, requests int64) Config {
		u := *base
		u.Path, u.RawPath = prefix+path, ""
		return Config{URL: u.String(), Method: method, Headers: auth, Body: body, Connections: conns,
			Rate: rate, Duration: cfg.Duration, Requests: requests, Timeout: cfg.Timeout,
			Progress: cfg.Progress, ProgressInterval: cfg.ProgressInterval}
	}
	insertURI := prefix + "findings/credentials"
	if f.inserts, err = New(common("findings/credentials", "PUT", f.appendFinding(nil, 0), cfg.Connections, cfg.Rate, cfg.Requests)); err != nil {
		return nil, err
	}
	f.inserts.label = "inserts"
	f.inserts.newVary = func() func([]byte, uint64) []byte {
		var body []byte
		return func(dst []byte, n uint64) []byte {
			body = f.appendFinding(body[:0], n)
			return f.inserts.appendRequest(dst, insertURI, body)
		}
	}
	if cfg.Readers == 0 {
		return f, nil
	}
	if f.pages, err = New(common("findings/credential", "GET", []byte{}, cfg.Readers, 0, 0)); err != nil {
		return nil, err
	}
	f.pages.label = "pages  "
	listURI := prefix + "findings/credential?limit=" + strconv.Itoa(cfg.PageSize) + "&page="
	f.pages.newVary = func() func([]byte, uint64) []byte {
		uri := []byte(listURI)
		return func(dst []byte, n uint64) []byte {
			uri = strconv.AppendUint(uri[:len(listURI)], n%uint64(cfg.Pages)+1, 10)
			return f.pages.appendRequest(dst, string(uri), nil)
		}
	}
	return f, nil
}

// appendFinding appends the JSON of finding n of the run: distinct from
// every other finding, so that each insert is new (201).
func (f *Findings) appendFinding(dst []byte, n uint64) []byte {
	dst = append(dst, `{"monitored_domain_id": 1, "tool_code": "squall-bench", "resource_url": "https://bench.invalid/login", "username": "squall-bench-`...)
	dst = append(dst, f.run...)
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, n, 10)
	dst = append(dst, `@bench.invalid", "hash": "`...)
	h := strconv.FormatUint(n, 16)
	dst = append(dst, strings.Repeat("0", 64-len(h))...)
	dst = append(dst, h...)
	return append(dst, `", "hash_algorithm": "SHA-256"}`...)
}

// Run runs the inserts and the reads side by side until the duration has
// passed (or the inserts are done, or ctx is done) and returns both
// summaries. It returns an error wrapping [ErrUnreachable] when no
// connection to the master could be opened.
func (f *Findings) Run(ctx context.Context) (*FindingsResult, error) {
	r := &FindingsResult{Run: f.run}
	// The readers stop with the inserts, which --requests may end early.
	insertsDone := make(chan struct{})
	var wg sync.WaitGroup
	var pagesErr error
	if f.pages != nil {
		f.pages.stop = insertsDone
		wg.Go(func() { r.Pages, pagesErr = f.pages.Run(ctx) })
	}
	var err error
	r.Inserts, err = f.inserts.Run(ctx)
	close(insertsDone)
	wg.Wait()
	if err = errors.Join(err, pagesErr); err != nil {
		return nil, err
	}
	return r, nil
}
