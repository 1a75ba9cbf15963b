package action

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/tracing"
)

// elasticsearchExecutor indexes one document per action (Tornado's
// elasticsearch executor): payload endpoint (string; default
// elasticsearch.default_endpoint), index (string, required), data (any
// JSON, required) and auth (optional: {"type": "None"} sends no
// credentials).
//
// It speaks to Elasticsearch through the official client's low-level
// packages only, the transport (elastictransport: connections, basic auth
// or API key) and the request builders (esapi.BulkRequest): the client's
// root package and esutil, which link the whole typed API (about 860
// packages), are not imported. One batcher per endpoint (and per auth
// choice), created on first use, gathers the documents of concurrent
// actions into _bulk requests. A document is sent at once when no flush is
// under way; documents added during one wait for it and go together in the
// next (elasticsearch.wait_for_batch turns this off), and every document is
// sent within elasticsearch.flush_interval, or as soon as
// elasticsearch.flush_bytes would be buffered. So a lone action waits for
// one request, not for the interval, and batches grow with the load; at
// most elasticsearch.workers requests per endpoint are in flight. Execute
// adds its document as a "create" operation (valid for data streams too)
// and waits for that document's own result, so the action succeeds only
// once Elasticsearch has indexed it. When the action's event id is known,
// the document's _id is the action's [tree.Action.IdempotencyKey], the same
// for every attempt and every redelivery of the event: a create that
// conflicts (409) found the document an earlier one indexed, and succeeds.
// Without an event id the document has no _id (what POST <index>/_doc/
// does). Close flushes what is buffered.
//
// The endpoint must be the default endpoint or one of
// elasticsearch.allowed_endpoints: the configured credentials (basic auth
// or API key) are sent to those only. A document rejected with 408, 429 or
// 5xx, a whole _bulk request answered with one of those, network errors and
// timeouts are retriable; other rejections (400 mapping and parse errors,
// 401, 403, 404...) are permanent. Errors carry Elasticsearch's error type
// and reason ([ElasticsearchError]); credentials never appear in errors or
// logs.
type elasticsearchExecutor struct {
	cfg       ElasticsearchConfig
	def       string
	allowed   []string
	password  string
	apiKey    string
	transport http.RoundTripper
	// own is the transport built here (nil when it came from Deps); its
	// idle connections are closed by Close.
	own *http.Transport

	// tracer records the _bulk requests; nil: tracing off.
	tracer trace.Tracer

	mu       sync.RWMutex // held for reading while a document is added
	closed   bool
	batchers map[esTarget]*esBatcher
}

var (
	_ Executor  = (*elasticsearchExecutor)(nil)
	_ io.Closer = (*elasticsearchExecutor)(nil)
)

// esTarget identifies a batcher: an endpoint, with or without the
// configured credentials.
type esTarget struct {
	endpoint string
	auth     bool
}

// ElasticsearchError is a document, or a whole _bulk request, that
// Elasticsearch refused. Whether the action is retried follows Status.
type ElasticsearchError struct {
	// Endpoint is the Elasticsearch base URL.
	Endpoint string
	// Index is the document's index; empty for a whole-request failure.
	Index string
	// Status is the HTTP status of the document (or of the request).
	Status int
	// Type and Reason are Elasticsearch's error type (such as
	// "mapper_parsing_exception") and message; CauseType and CauseReason
	// its caused_by, when present.
	Type, Reason           string
	CauseType, CauseReason string
}

// Error implements error.
func (e *ElasticsearchError) Error() string {
	var b strings.Builder
	b.WriteString("elasticsearch ")
	b.WriteString(e.Endpoint)
	if e.Index != "" {
		b.WriteString(" index ")
		b.WriteString(strconv.Quote(e.Index))
	} else {
		b.WriteString(" _bulk request")
	}
	b.WriteString(": status ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Type != "" {
		b.WriteString(": ")
		b.WriteString(e.Type)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.CauseType != "" || e.CauseReason != "" {
		b.WriteString(" (caused by ")
		b.WriteString(e.CauseType)
		if e.CauseReason != "" {
			b.WriteString(": ")
			b.WriteString(e.CauseReason)
		}
		b.WriteString(")")
	}
	return b.String()
}

// retriable tells whether the same document may be accepted later: the
// cluster was overloaded (429), slow (408) or failing (5xx).
func (e *ElasticsearchError) retriable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout || e.Status >= 500
}

// classify marks the error retriable or permanent according to its status.
func (e *ElasticsearchError) classify() error {
	if e.retriable() {
		return NewRetriable(e)
	}
	return NewPermanent(e)
}

func newElasticsearchExecutor(cfg ElasticsearchConfig, client *http.Client) (*elasticsearchExecutor, error) {
	e := &elasticsearchExecutor{
		cfg:      cfg,
		def:      strings.TrimRight(cfg.DefaultEndpoint, "/"),
		batchers: map[esTarget]*esBatcher{},
	}
	for _, u := range cfg.AllowedEndpoints {
		e.allowed = append(e.allowed, strings.TrimRight(u, "/"))
	}
	if cfg.PasswordFile != "" {
		s, err := readSecretFile(cfg.PasswordFile)
		if err != nil {
			return nil, &ConfigError{Field: "elasticsearch.password_file", Err: err}
		}
		e.password = s
	}
	if cfg.APIKeyFile != "" {
		s, err := readSecretFile(cfg.APIKeyFile)
		if err != nil {
			return nil, &ConfigError{Field: "elasticsearch.api_key_file", Err: err}
		}
		e.apiKey = s
	}
	if client != nil && client.Transport != nil {
		e.transport = client.Transport
	} else {
		e.own = http.DefaultTransport.(*http.Transport).Clone()
		e.transport = e.own
	}
	if cfg.CAFile != "" {
		t, ok := e.transport.(*http.Transport)
		if !ok {
			return nil, &ConfigError{Field: "elasticsearch.ca_file", Err: fmt.Errorf("the HTTP client's transport is a %T, not an *http.Transport", e.transport)}
		}
		pool, err := readCAFile(cfg.CAFile)
		if err != nil {
			return nil, &ConfigError{Field: "elasticsearch.ca_file", Err: err}
		}
		if e.own == nil {
			e.own = t.Clone()
			e.transport = e.own
		}
		if e.own.TLSClientConfig == nil {
			e.own.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		e.own.TLSClientConfig.RootCAs = pool
	}
	return e, nil
}

// readCAFile reads a PEM file of certificate authorities.
func readCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// Execute indexes the document and waits for Elasticsearch's answer about it.
func (e *elasticsearchExecutor) Execute(ctx context.Context, a tree.Action) error {
	endpoint := e.def
	if v, ok := a.Payload["endpoint"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return payloadError(IDElasticsearch, "endpoint", "must be a non-empty string")
		}
		endpoint = strings.TrimRight(s, "/")
		if endpoint != e.def && !slices.Contains(e.allowed, endpoint) {
			return payloadError(IDElasticsearch, "endpoint", "is not the default endpoint nor in elasticsearch.allowed_endpoints")
		}
	}
	if endpoint == "" {
		return payloadError(IDElasticsearch, "endpoint", "is required without elasticsearch.default_endpoint")
	}
	index, ok := a.Payload["index"].(string)
	if !ok || index == "" {
		return payloadError(IDElasticsearch, "index", "must be a non-empty string")
	}
	if !printable(index) {
		return payloadError(IDElasticsearch, "index", "must be printable UTF-8 text")
	}
	data, ok := a.Payload["data"]
	if !ok {
		return payloadError(IDElasticsearch, "data", "is required")
	}
	withAuth := true
	if v, ok := a.Payload["auth"]; ok {
		m, _ := v.(map[string]any)
		if t, _ := m["type"].(string); t != "None" {
			return payloadError(IDElasticsearch, "auth", `must be {"type": "None"} (other types are not supported)`)
		}
		withAuth = false
	}
	// encoding/json writes no raw newline: the document is one NDJSON line.
	body, err := json.Marshal(data)
	if err != nil {
		return payloadError(IDElasticsearch, "data", "is not JSON: "+err.Error())
	}
	if err := ctx.Err(); err != nil {
		return NewRetriable(fmt.Errorf("elasticsearch %s: %w", endpoint, context.Cause(ctx)))
	}

	doc := newESDoc(index, a.IdempotencyKey(), body)
	if e.tracer != nil {
		doc.span = trace.SpanContextFromContext(ctx)
	}
	if err := e.add(esTarget{endpoint: endpoint, auth: withAuth}, doc); err != nil {
		return err
	}

	wait := time.NewTimer(e.resultWait())
	defer wait.Stop()
	select {
	case err := <-doc.result:
		return err
	case <-ctx.Done():
		return NewRetriable(fmt.Errorf("elasticsearch %s: %w while waiting for the bulk response", endpoint, context.Cause(ctx)))
	case <-wait.C:
		return NewRetriable(fmt.Errorf("elasticsearch %s: no result for the document within %s", endpoint, e.resultWait()))
	}
}

// resultWait bounds the wait for a document's result once it is added: it
// comes within a flush interval and two requests (the one a worker may be
// sending, then its own). The bound only guards against a result that never
// comes.
func (e *elasticsearchExecutor) resultWait() time.Duration {
	return time.Duration(e.cfg.FlushInterval) + 2*time.Duration(e.cfg.Timeout) + time.Second
}

// printable reports whether s is valid UTF-8 of printable characters: an
// index name is sent as it is, and control characters or invalid UTF-8
// would only come back as Elasticsearch errors.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// add hands the document to the target's batcher, creating it on first use.
func (e *elasticsearchExecutor) add(t esTarget, doc *esDoc) error {
	e.mu.RLock()
	b := e.batchers[t]
	for b == nil && !e.closed {
		e.mu.RUnlock()
		if err := e.create(t); err != nil {
			return err
		}
		e.mu.RLock()
		b = e.batchers[t]
	}
	defer e.mu.RUnlock()
	if e.closed {
		return NewPermanent(fmt.Errorf("elasticsearch: %w", ErrClosed))
	}
	// Close waits for the read lock: the batcher is open while add runs.
	b.add(doc)
	return nil
}

// create builds the client and batcher of a target, unless the executor is
// closed or another call did it first.
func (e *elasticsearchExecutor) create(t esTarget) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.batchers[t] != nil {
		return nil
	}
	u, err := url.Parse(t.endpoint)
	if err != nil {
		return NewPermanent(fmt.Errorf("elasticsearch endpoint: %w", err))
	}
	opts := []elastictransport.Option{
		elastictransport.WithURLs(u),
		elastictransport.WithTransport(e.transport),
		// Registry.Run retries, with backoff and metrics.
		elastictransport.WithDisableRetry(),
	}
	if t.auth && e.apiKey != "" {
		opts = append(opts, elastictransport.WithAPIKey(e.apiKey))
	}
	if t.auth && e.cfg.Username != "" {
		opts = append(opts, elastictransport.WithBasicAuth(e.cfg.Username, e.password))
	}
	client, err := elastictransport.NewClient(opts...)
	if err != nil {
		return NewPermanent(fmt.Errorf("elasticsearch %s: client: %w", t.endpoint, err))
	}
	e.batchers[t] = newESBatcher(client, t.endpoint, e.cfg)
	e.batchers[t].tracer = e.tracer
	return nil
}

// Close flushes the documents buffered, waits for their results (each
// request bounded by elasticsearch.timeout) and closes the connections.
// Later actions fail with [ErrClosed].
func (e *elasticsearchExecutor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	batchers := e.batchers
	e.batchers = nil
	e.mu.Unlock()

	// Close has no caller's context; the bound is the one a document waits
	// for its result in Execute.
	ctx, cancel := context.WithTimeout(context.Background(), e.resultWait())
	defer cancel()
	var errs []error
	for t, b := range batchers {
		if err := b.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("elasticsearch %s: flush: %w", t.endpoint, err))
		}
		if err := b.client.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("elasticsearch %s: close: %w", t.endpoint, err))
		}
	}
	if e.own != nil {
		e.own.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// esDoc is one document on its way to Elasticsearch.
type esDoc struct {
	index string
	// withID tells whether the document has an id: then a conflict means
	// an earlier attempt indexed it.
	withID bool
	// ndjson is the document's two lines of a _bulk body: the "create"
	// operation naming the index, then the source.
	ndjson []byte
	// result receives the document's outcome, exactly once.
	result chan error
	// span is the span of the action that added it, if any.
	span trace.SpanContext
}

func newESDoc(index, id string, source []byte) *esDoc {
	quoted, _ := json.Marshal(index) // a string always encodes
	b := make([]byte, 0, len(`{"create":{"_index":,"_id":""}}`)+len(quoted)+len(id)+len(source)+2)
	b = append(b, `{"create":{"_index":`...)
	b = append(b, quoted...)
	if id != "" {
		// base64url: nothing to escape.
		b = append(b, `,"_id":"`...)
		b = append(b, id...)
		b = append(b, '"')
	}
	b = append(b, "}}\n"...)
	b = append(b, source...)
	b = append(b, '\n')
	return &esDoc{index: index, withID: id != "", ndjson: b, result: make(chan error, 1)}
}

// esBatcher gathers the documents of one target into _bulk requests. A
// batch is taken from the buffer, and sent on its own goroutine, by the
// flusher (started when a document arrives while no flush is under way,
// unless wait_for_batch; it sends one batch after the other until the
// buffer is empty), by add when the buffer would reach flush_bytes, by the
// flush_interval ticker, and by close. The slots bound the requests in
// flight to elasticsearch.workers.
type esBatcher struct {
	client       *elastictransport.Client
	endpoint     string
	timeout      time.Duration
	flushBytes   int
	waitForBatch bool
	slots        chan struct{} // one per request in flight
	tracer       trace.Tracer  // nil: tracing off

	mu       sync.Mutex
	pending  []*esDoc
	size     int    // bytes of pending
	added    uint64 // documents added since the start
	flushing bool   // the flusher is running

	sends   sync.WaitGroup // batches being sent
	ctx     context.Context
	abort   context.CancelFunc // ends the requests in flight
	stop    chan struct{}      // closed to stop the ticker
	stopped chan struct{}      // closed when the ticker returned
}

func newESBatcher(client *elastictransport.Client, endpoint string, cfg ElasticsearchConfig) *esBatcher {
	// The batcher belongs to the executor, which has no context: close
	// cancels this one.
	ctx, abort := context.WithCancel(context.Background())
	b := &esBatcher{
		client:       client,
		endpoint:     endpoint,
		timeout:      time.Duration(cfg.Timeout),
		flushBytes:   cfg.FlushBytes,
		waitForBatch: cfg.WaitForBatch,
		slots:        make(chan struct{}, cfg.Workers),
		ctx:          ctx,
		abort:        abort,
		stop:         make(chan struct{}),
		stopped:      make(chan struct{}),
	}
	go b.tick(time.Duration(cfg.FlushInterval))
	return b
}

// add buffers the document. A batch that would reach flush_bytes with it is
// sent first, and a document of flush_bytes or more goes alone.
func (b *esBatcher) add(doc *esDoc) {
	var full, alone []*esDoc
	b.mu.Lock()
	if len(b.pending) > 0 && b.size+len(doc.ndjson) >= b.flushBytes {
		full = b.take()
	}
	if len(doc.ndjson) >= b.flushBytes {
		alone = []*esDoc{doc}
	} else {
		b.pending = append(b.pending, doc)
		b.size += len(doc.ndjson)
	}
	b.added++
	flush := !b.waitForBatch && !b.flushing && len(b.pending) > 0
	if flush {
		b.flushing = true
		b.sends.Add(1)
	}
	b.mu.Unlock()

	if flush {
		go b.flusher()
	}
	b.sendAsync(full)
	b.sendAsync(alone)
}

// sendAsync sends batch, unless it is nil, in a goroutine of its own that
// close waits for.
func (b *esBatcher) sendAsync(batch []*esDoc) {
	if batch == nil {
		return
	}
	b.sends.Add(1)
	go func() {
		defer b.sends.Done()
		b.send(batch)
	}()
}

// sendBuffered sends what is buffered, if anything, as one batch (see
// sendAsync).
func (b *esBatcher) sendBuffered() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	b.sendAsync(batch)
}

// take empties the buffer and returns its documents (nil when empty). b.mu
// is held.
func (b *esBatcher) take() []*esDoc {
	batch := b.pending
	b.pending, b.size = nil, 0
	return batch
}

// flusher sends the buffer until it finds it empty: the documents added
// during a request go together in the next.
func (b *esBatcher) flusher() {
	defer b.sends.Done()
	for {
		b.mu.Lock()
		batch := b.take()
		if batch == nil {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(batch)
	}
}

// tick sends the buffer every interval, until close.
func (b *esBatcher) tick(interval time.Duration) {
	defer close(b.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		b.sendBuffered()
	}
}

// close sends what is buffered and waits for every request; when ctx ends
// first, the requests in flight are canceled (their documents fail,
// retriable). add must not be called during or after close.
func (b *esBatcher) close(ctx context.Context) error {
	close(b.stop)
	<-b.stopped
	b.sendBuffered()
	done := make(chan struct{})
	go func() {
		b.sends.Wait()
		close(done)
	}()
	defer b.abort()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		b.abort()
		<-done
		return fmt.Errorf("documents still in flight: %w", context.Cause(ctx))
	}
}

// send sends one batch as a _bulk request, when a worker slot is free, and
// gives every document its result.
func (b *esBatcher) send(batch []*esDoc) {
	err := b.acquire()
	if err == nil {
		defer func() { <-b.slots }()
		var results []error
		results, err = b.bulk(batch)
		if err == nil {
			for i, d := range batch {
				d.result <- results[i]
			}
			return
		}
	}
	var ee *ElasticsearchError
	if errors.As(err, &ee) {
		err = ee.classify()
	} else {
		err = NewRetriable(fmt.Errorf("elasticsearch %s: %w", b.endpoint, err))
	}
	for _, d := range batch {
		d.result <- err
	}
}

// acquire takes a worker slot, unless the batcher is aborted first.
func (b *esBatcher) acquire() error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-b.ctx.Done():
		return fmt.Errorf("%w before the request was sent", ErrClosed)
	}
}

// maxBulkResponse bounds the body of a _bulk response read into memory.
const maxBulkResponse = 64 << 20

// bulkResponse is the part of a _bulk answer read: one result per
// document, in the request's order.
type bulkResponse struct {
	Items []map[string]bulkItem `json:"items"`
}

// bulkItem is one document's result.
type bulkItem struct {
	Status int `json:"status"`
	Error  struct {
		Type     string `json:"type"`
		Reason   string `json:"reason"`
		CausedBy struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"caused_by"`
	} `json:"error"`
}

// bulk sends the batch and returns each document's result, or the error of
// the whole request: an [*ElasticsearchError] when Elasticsearch refused
// it, another error when it could not be sent or its answer is not one.
// The request, reading its answer included, is bounded by the timeout.
func (b *esBatcher) bulk(batch []*esDoc) ([]error, error) {
	n := 0
	for _, d := range batch {
		n += len(d.ndjson)
	}
	body := make([]byte, 0, n)
	for _, d := range batch {
		body = append(body, d.ndjson...)
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	defer cancel()
	req := esapi.BulkRequest{
		Body:   bytes.NewReader(body),
		Header: http.Header{"Content-Type": {"application/x-ndjson"}},
	}
	var span trace.Span
	if b.tracer != nil {
		ctx, span = b.startBulkSpan(ctx, batch)
		defer span.End()
		tracing.Inject(ctx, req.Header)
	}
	resp, err := req.Do(ctx, b.client)
	if span != nil && err == nil {
		span.SetAttributes(attribute.Int(attrHTTPStatus, resp.StatusCode))
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && b.ctx.Err() == nil {
			return nil, fmt.Errorf("no response within %s: %w", b.timeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBulkResponse+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("read response: %w", err)
	case len(answer) > maxBulkResponse:
		return nil, fmt.Errorf("response larger than %d bytes", maxBulkResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ee := &ElasticsearchError{Endpoint: b.endpoint, Status: resp.StatusCode}
		var doc struct {
			Error struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"error"`
		}
		if json.Unmarshal(answer, &doc) == nil {
			ee.Type, ee.Reason = doc.Error.Type, doc.Error.Reason
		}
		return nil, ee
	}
	// What the official client checks before trusting an answer.
	if resp.Header.Get("X-Elastic-Product") != "Elasticsearch" {
		return nil, errors.New("the server is not Elasticsearch (its answer has no X-Elastic-Product: Elasticsearch header)")
	}
	var r bulkResponse
	if err := json.Unmarshal(answer, &r); err != nil {
		return nil, fmt.Errorf("decode the _bulk response: %w", err)
	}
	if len(r.Items) != len(batch) {
		return nil, fmt.Errorf("the response has %d results for %d documents", len(r.Items), len(batch))
	}
	results := make([]error, len(batch))
	for i, item := range r.Items {
		if len(item) != 1 {
			return nil, fmt.Errorf("result %d of the response has %d operations, want 1", i, len(item))
		}
		for _, res := range item {
			if res.Status >= 200 && res.Status <= 299 {
				continue
			}
			if res.Status == http.StatusConflict && batch[i].withID {
				// The document with this id exists: an earlier attempt,
				// or an earlier delivery of the event, created it.
				continue
			}
			ee := &ElasticsearchError{
				Endpoint: b.endpoint, Index: batch[i].index, Status: res.Status,
				Type: res.Error.Type, Reason: res.Error.Reason,
				CauseType: res.Error.CausedBy.Type, CauseReason: res.Error.CausedBy.Reason,
			}
			results[i] = ee.classify()
		}
	}
	return results, nil
}
