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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/esutil"

	"github.com/squallhq/squall/engine/tree"
)

// elasticsearchExecutor indexes one document per action (Tornado §7.3):
// payload endpoint (string; default elasticsearch.default_endpoint), index
// (string, required), data (any JSON, required) and auth (optional:
// {"type": "None"} sends no credentials).
//
// Documents go through the official client's bulk indexer
// ([esutil.BulkIndexer]): one indexer per endpoint (and per auth choice),
// created on first use, batches the documents of concurrent actions into
// _bulk requests. A document is sent at once when no flush is under way;
// documents added during one wait for it and go together in the next
// (elasticsearch.wait_for_batch turns this off), and every document is sent
// within elasticsearch.flush_interval, or as soon as
// elasticsearch.flush_bytes are buffered. So a lone action waits for one
// request, not for the interval, and batches grow with the load. Execute
// adds its document as a "create" operation without an id (what POST
// <index>/_doc/ does, also valid for data streams) and waits for that
// document's own result, so the action succeeds only once Elasticsearch has
// indexed it. Close flushes what is buffered.
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

	mu       sync.RWMutex // held for reading while an item is added
	closed   bool
	indexers map[esTarget]*esIndexer
}

var (
	_ Executor  = (*elasticsearchExecutor)(nil)
	_ io.Closer = (*elasticsearchExecutor)(nil)
)

// esTarget identifies a bulk indexer: an endpoint, with or without the
// configured credentials.
type esTarget struct {
	endpoint string
	auth     bool
}

// esIndexer is the client and bulk indexer of one target. Unless
// wait_for_batch is set, its flusher goroutine flushes the indexer whenever
// a document was added since the last flush began.
type esIndexer struct {
	client *elasticsearch.BaseClient
	bulk   esutil.BulkIndexer
	kick   chan struct{} // a document is waiting; nil with wait_for_batch
	stop   context.CancelFunc
	done   chan struct{} // closed when the flusher returns
}

// flusher runs the flushes asked for through kick, one at a time, until
// ctx ends. Flush reports no document's result (the callbacks do) and fails
// only when ctx ends.
func (ix *esIndexer) flusher(ctx context.Context) {
	defer close(ix.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.kick:
		}
		_ = ix.bulk.Flush(ctx)
	}
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
		indexers: map[esTarget]*esIndexer{},
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

	// The indexer calls back exactly once per item added.
	result := make(chan error, 1)
	item := esutil.BulkIndexerItem{
		Action: "create",
		Index:  index,
		Body:   bytes.NewReader(body),
		OnSuccess: func(context.Context, esutil.BulkIndexerItem, esutil.BulkIndexerResponseItem) {
			result <- nil
		},
		OnFailure: func(_ context.Context, _ esutil.BulkIndexerItem, res esutil.BulkIndexerResponseItem, err error) {
			result <- itemError(endpoint, index, res, err)
		},
	}
	if err := e.add(ctx, esTarget{endpoint: endpoint, auth: withAuth}, item); err != nil {
		return err
	}

	wait := time.NewTimer(e.resultWait())
	defer wait.Stop()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return NewRetriable(fmt.Errorf("elasticsearch %s: %w while waiting for the bulk response", endpoint, context.Cause(ctx)))
	case <-wait.C:
		return NewRetriable(fmt.Errorf("elasticsearch %s: no result for the document within %s", endpoint, e.resultWait()))
	}
}

// resultWait bounds the wait for a document's result once it is added: it
// comes within a flush interval and two requests (the one its worker may be
// sending, then its own). The bound only guards against a result that never
// comes.
func (e *elasticsearchExecutor) resultWait() time.Duration {
	return time.Duration(e.cfg.FlushInterval) + 2*time.Duration(e.cfg.Timeout) + time.Second
}

// printable reports whether s is valid UTF-8 of printable characters: the
// bulk indexer quotes the index with strconv, which writes valid JSON only
// for those.
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

// itemError turns a bulk indexer failure into a classified error: a
// document refused by Elasticsearch (err nil, res holding its status and
// error), a whole request refused (an [*ElasticsearchError] from
// bulkTransport), or a transport failure (retriable).
func itemError(endpoint, index string, res esutil.BulkIndexerResponseItem, err error) error {
	if err == nil {
		ee := &ElasticsearchError{
			Endpoint: endpoint, Index: index, Status: res.Status,
			Type: res.Error.Type, Reason: res.Error.Reason,
			CauseType: res.Error.Cause.Type, CauseReason: res.Error.Cause.Reason,
		}
		return ee.classify()
	}
	var ee *ElasticsearchError
	if errors.As(err, &ee) {
		return ee.classify()
	}
	return NewRetriable(fmt.Errorf("elasticsearch %s: %w", endpoint, err))
}

// add adds the item to the target's bulk indexer, creating it on first use.
func (e *elasticsearchExecutor) add(ctx context.Context, t esTarget, item esutil.BulkIndexerItem) error {
	e.mu.RLock()
	ix := e.indexers[t]
	for ix == nil && !e.closed {
		e.mu.RUnlock()
		if err := e.create(t); err != nil {
			return err
		}
		e.mu.RLock()
		ix = e.indexers[t]
	}
	defer e.mu.RUnlock()
	if e.closed {
		return NewPermanent(fmt.Errorf("elasticsearch: %w", ErrClosed))
	}
	// Close waits for the read lock: the indexer is open while Add runs.
	if err := ix.bulk.Add(ctx, item); err != nil {
		return NewRetriable(fmt.Errorf("elasticsearch %s: add document: %w", t.endpoint, err))
	}
	if ix.kick != nil {
		select {
		case ix.kick <- struct{}{}:
		default: // a flush is already asked for: it takes this document
		}
	}
	return nil
}

// create builds the client and bulk indexer of a target, unless the
// executor is closed or another call did it first.
func (e *elasticsearchExecutor) create(t esTarget) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.indexers[t] != nil {
		return nil
	}
	cfg := elasticsearch.Config{
		Addresses: []string{t.endpoint},
		Transport: e.transport,
		// Registry.Run retries, with backoff and metrics.
		DisableRetry: true,
	}
	if t.auth {
		cfg.APIKey = e.apiKey
		cfg.Username, cfg.Password = e.cfg.Username, e.password
	}
	client, err := elasticsearch.NewBaseClient(cfg)
	if err != nil {
		return NewPermanent(fmt.Errorf("elasticsearch %s: client: %w", t.endpoint, err))
	}
	bulk, err := esutil.NewBulkIndexer(esutil.BulkIndexerConfig{
		Client:        &bulkTransport{es: client, endpoint: t.endpoint, timeout: time.Duration(e.cfg.Timeout)},
		Decoder:       bulkDecoder{},
		NumWorkers:    e.cfg.Workers,
		FlushBytes:    e.cfg.FlushBytes,
		FlushInterval: time.Duration(e.cfg.FlushInterval),
		// Room for the documents that arrive during a flush, so that Add
		// rarely blocks; the actions waiting for their results bound it.
		QueueSizeMultiplier: esQueuePerWorker,
	})
	if err != nil {
		return NewPermanent(fmt.Errorf("elasticsearch %s: bulk indexer: %w", t.endpoint, err))
	}
	ix := &esIndexer{client: client, bulk: bulk, done: make(chan struct{})}
	if e.cfg.WaitForBatch {
		close(ix.done)
	} else {
		// The flusher belongs to the executor, which has no context: Close
		// cancels this one.
		ctx, cancel := context.WithCancel(context.Background())
		ix.kick, ix.stop = make(chan struct{}, 1), cancel
		go ix.flusher(ctx)
	}
	e.indexers[t] = ix
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
	indexers := e.indexers
	e.indexers = nil
	e.mu.Unlock()

	// Close has no caller's context; the bound is the one a document waits
	// for its result in Execute.
	ctx, cancel := context.WithTimeout(context.Background(), e.resultWait())
	defer cancel()
	var errs []error
	for t, ix := range indexers {
		if ix.stop != nil {
			ix.stop()
		}
		<-ix.done
		if err := ix.bulk.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("elasticsearch %s: flush: %w", t.endpoint, err))
		}
		if err := ix.client.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("elasticsearch %s: close: %w", t.endpoint, err))
		}
	}
	if e.own != nil {
		e.own.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// esQueuePerWorker is the capacity of each bulk indexer worker's queue.
const esQueuePerWorker = 256

// maxBulkResponse bounds the body of a _bulk response read into memory.
const maxBulkResponse = 64 << 20

// bulkTransport stands between the bulk indexer and the client. It bounds
// each request with the timeout (the indexer sends without a deadline),
// reads the whole response within it, turns a refused request into an
// [*ElasticsearchError] (which the indexer hands to each item's OnFailure,
// wrapped), and tells bulkDecoder how many documents the request carried.
type bulkTransport struct {
	es       esapi.Transport
	endpoint string
	timeout  time.Duration
}

var _ esapi.Transport = (*bulkTransport)(nil)

// Perform sends the request.
func (t *bulkTransport) Perform(req *http.Request) (*http.Response, error) {
	items := -1
	if req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var c lineCounter
			if _, err := io.Copy(&c, body); err == nil {
				// Each document is a metadata line and a source line.
				items = c.n / 2
			}
		}
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	defer cancel()
	resp, err := t.es.Perform(req.WithContext(ctx))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && req.Context().Err() == nil {
			return nil, fmt.Errorf("no response within %s: %w", t.timeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBulkResponse+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("read response: %w", err)
	case len(body) > maxBulkResponse:
		return nil, fmt.Errorf("response larger than %d bytes", maxBulkResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ee := &ElasticsearchError{Endpoint: t.endpoint, Status: resp.StatusCode}
		var doc struct {
			Error struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &doc) == nil {
			ee.Type, ee.Reason = doc.Error.Type, doc.Error.Reason
		}
		return nil, ee
	}
	resp.Body = &bulkBody{Reader: bytes.NewReader(body), items: items}
	return resp, nil
}

// lineCounter counts the newlines written to it.
type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// bulkBody is a _bulk response body read by bulkTransport, with the number
// of documents of its request (-1 when unknown).
type bulkBody struct {
	*bytes.Reader
	items int
}

// Close implements io.Closer.
func (*bulkBody) Close() error { return nil }

// bulkDecoder decodes a _bulk response and checks that it answers every
// document of the request: the indexer would otherwise leave documents
// without a result, or index past its items.
type bulkDecoder struct{}

// UnmarshalFromReader decodes the response.
func (bulkDecoder) UnmarshalFromReader(r io.Reader, blk *esutil.BulkIndexerResponse) error {
	if err := json.NewDecoder(r).Decode(blk); err != nil {
		return err
	}
	if b, ok := r.(*bulkBody); ok && b.items >= 0 && len(blk.Items) != b.items {
		n := len(blk.Items)
		blk.Items = nil
		return fmt.Errorf("the response has %d results for %d documents", n, b.items)
	}
	return nil
}
