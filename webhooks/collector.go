package webhooks

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/squallhq/squall/internal/jsonlimit"
)

// DefaultTenant is the tenant of an event when neither the webhook nor the
// caller of [Collector.Collect] names one (DESIGN decision 12: the intake's
// configured tenant defaults to "master").
const DefaultTenant = "master"

// CollectorConfig is the collector_config object of a webhook file: how a
// request body becomes an event.
type CollectorConfig struct {
	// EventType is the event type: a literal string or a ${…} expression
	// that must evaluate to a non-empty string.
	EventType string
	// Payload is the payload template. Strings of the form ${…} are
	// JMESPath expressions over the body; objects and arrays are evaluated
	// member by member; everything else is copied as written. Numbers are
	// best given as json.Number (decode with json.Decoder.UseNumber).
	Payload map[string]any
	// MaxOutputSize bounds, in JSON bytes, what the expressions may build
	// from one body (budget.go); 0 means [DefaultMaxOutputSize]. [Parse]
	// sets it to the larger of that and twice the max_payload_size.
	MaxOutputSize int64
}

// Event is what a webhook call produces, in the JSON shape of the Kafka
// record value: {"type", "created_ms", "metadata": {"tenant_id"}, "payload"}.
type Event struct {
	// Type is the event type.
	Type string `json:"type"`
	// CreatedMs is the creation time in milliseconds since the Unix epoch.
	CreatedMs int64 `json:"created_ms"`
	// Metadata always holds "tenant_id" (a string).
	Metadata map[string]any `json:"metadata"`
	// Payload is the evaluated payload template. It shares nothing with the
	// request body, the collector, or other events; its numbers are
	// json.Number values.
	Payload map[string]any `json:"payload"`
}

// Collector turns a request body into an [Event]. It is compiled once, when
// the webhook is loaded, and is safe for concurrent use.
type Collector struct {
	eventType node
	payload   node
	tenantID  string
	// readsBody is false when the template has no expression: the body is
	// then only checked to be JSON, not decoded.
	readsBody bool
	// direct is true when AppendEvent may write the event straight from
	// the body (canonical.go).
	direct bool
	// budget is the output budget.
	budget int64
	// members holds *[]member scratch space of the direct path.
	members sync.Pool
}

// NewCollector compiles cfg. tenantID is the webhook's own tenant_id, or ""
// to take the tenant given to Collect. Errors are [*ValidationError] values
// naming the template field, such as "collector_config.payload.ref".
func NewCollector(cfg CollectorConfig, tenantID string) (*Collector, error) {
	const path = "collector_config"
	if cfg.EventType == "" {
		return nil, &ValidationError{Field: path + ".event_type", Err: ErrRequired}
	}
	if cfg.Payload == nil {
		return nil, &ValidationError{Field: path + ".payload", Err: ErrRequired}
	}
	et, err := compile(cfg.EventType, path+".event_type")
	if err != nil {
		return nil, err
	}
	pl, err := compile(cfg.Payload, path+".payload")
	if err != nil {
		return nil, err
	}
	budget := cfg.MaxOutputSize
	if budget <= 0 {
		budget = DefaultMaxOutputSize
	}
	c := &Collector{eventType: et, payload: pl, tenantID: tenantID, budget: budget}
	c.readsBody = et.hasExpression() || pl.hasExpression()
	c.direct = c.isDirect()
	return c, nil
}

// Collect builds the event for one request body received at now. The
// event's metadata.tenant_id is the webhook's tenant_id when it has one,
// else tenantID, else DefaultTenant.
//
// Errors, and the HTTP status the intake answers with:
//   - [ErrBodyNotJSON] (400): body is not exactly one JSON value in UTF-8;
//   - [*TemplateError] (422), [ErrEventType] and [ErrOutputBudget]
//     included: the body is JSON but the template cannot be evaluated
//     against it, or might build more than the output budget from it.
//
// Match them with [errors.Is] and [errors.As].
func (c *Collector) Collect(body []byte, now time.Time, tenantID string) (Event, error) {
	if !utf8.Valid(body) {
		return Event{}, fmt.Errorf("%w: invalid UTF-8", ErrBodyNotJSON)
	}
	var doc document
	if c.readsBody {
		var v any
		if err := decodeJSON(body, &v); err != nil {
			return Event{}, fmt.Errorf("%w: %w", ErrBodyNotJSON, err)
		}
		doc = newDocument(v)
		doc.size, doc.budget, doc.left = float64(len(body)), c.budget, c.budget
	} else if !json.Valid(body) {
		return Event{}, ErrBodyNotJSON
	}

	et, err := c.eventType.eval(&doc)
	if err != nil {
		return Event{}, err
	}
	typ, ok := et.(string)
	if !ok || typ == "" {
		got := jsonType(et)
		if ok {
			got = "empty string"
		}
		return Event{}, &TemplateError{Field: c.eventType.path, Err: fmt.Errorf("%w, got %s", ErrEventType, got)}
	}
	pl, err := c.payload.eval(&doc)
	if err != nil {
		return Event{}, err
	}

	return Event{
		Type:      typ,
		CreatedMs: now.UnixMilli(),
		Metadata:  map[string]any{"tenant_id": c.tenant(tenantID)},
		Payload:   pl.(map[string]any),
	}, nil
}

// AppendEvent appends the JSON of the event for one request body received at
// now to dst, and returns it with the event's tenant: the same bytes as
// [Event.AppendJSON] of what [Collector.Collect] returns, and the same
// errors. It is the cheaper of the two: a template whose only expressions are
// ${@} is written straight from the body (in most cases), without building
// the event.
func (c *Collector) AppendEvent(dst, body []byte, now time.Time, tenantID string) ([]byte, string, error) {
	tenant := c.tenant(tenantID)
	if c.direct {
		if b, ok := c.appendDirect(dst, body, now.UnixMilli(), tenant); ok {
			return b, tenant, nil
		}
	}
	ev, err := c.Collect(body, now, tenantID)
	if err != nil {
		return dst, "", err
	}
	b, err := ev.AppendJSON(dst)
	if err != nil {
		return dst, "", fmt.Errorf("encode event: %w", err)
	}
	// The direct path's events are shallow (see isDirect); this one's
	// depth is measured.
	if jsonlimit.Check(b[len(dst):], jsonlimit.Limits{MaxDepth: jsonlimit.MaxEventDepth}) != nil {
		return dst, "", ErrEventTooDeep
	}
	return b, tenant, nil
}

// tenant is the tenant of an event: the webhook's, else tenantID, else
// DefaultTenant.
func (c *Collector) tenant(tenantID string) string {
	switch {
	case c.tenantID != "":
		return c.tenantID
	case tenantID != "":
		return tenantID
	}
	return DefaultTenant
}

// hasExpression reports whether the template contains a ${…} expression.
func (n *node) hasExpression() bool {
	if n.kind == kindExpr {
		return true
	}
	for i := range n.kids {
		if n.kids[i].hasExpression() {
			return true
		}
	}
	return false
}
