package action

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/squallhq/squall/engine/tree"
)

// Producer writes one message to a Kafka topic. The engine passes one built
// on its Kafka writer through [Deps.Producer], so that this package does not
// depend on a Kafka client. Produce returns once the message is acknowledged
// (or failed); it must be safe for concurrent use.
type Producer interface {
	Produce(ctx context.Context, topic string, key, value []byte, headers []Header) error
}

// Header is a record header of a kafka action's message.
type Header struct {
	Key   string
	Value []byte
}

// The headers of a kafka action's message when its event id is known: the
// event id, the action's position in the tree and the key derived from
// both ([tree.Action.IdempotencyKey]), which a consumer may use to drop
// the messages a redelivered event produces again.
const (
	HeaderEventID        = "squall-event-id"
	HeaderActionPosition = "squall-action-position"
	HeaderIdempotency    = "squall-idempotency-key"
)

// ProducerFunc adapts a function to [Producer].
type ProducerFunc func(ctx context.Context, topic string, key, value []byte, headers []Header) error

// Produce calls f.
func (f ProducerFunc) Produce(ctx context.Context, topic string, key, value []byte, headers []Header) error {
	return f(ctx, topic, key, value, headers)
}

// kafkaExecutor produces one message per action. Payload: topic (string;
// default kafka.default_topic; must be the default topic or in
// kafka.allowed_topics), key (optional string) and value (any JSON; default
// the payload without topic and key). A producer failure is retriable.
// When the action's event id is known, the message carries the
// HeaderEventID, HeaderActionPosition and HeaderIdempotency headers.
type kafkaExecutor struct {
	p       Producer
	def     string
	allowed []string
}

var _ Executor = (*kafkaExecutor)(nil)

// Execute produces the message.
func (k *kafkaExecutor) Execute(ctx context.Context, a tree.Action) error {
	topic := k.def
	if v, ok := a.Payload["topic"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return payloadError(IDKafka, "topic", "must be a non-empty string")
		}
		if s != k.def && !slices.Contains(k.allowed, s) {
			return payloadError(IDKafka, "topic", fmt.Sprintf("%q is not the default topic nor in kafka.allowed_topics", s))
		}
		topic = s
	}
	if topic == "" {
		return payloadError(IDKafka, "topic", "is required without kafka.default_topic")
	}
	var key []byte
	if v, ok := a.Payload["key"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return payloadError(IDKafka, "key", "must be a string")
		}
		key = []byte(s)
	}
	var value any
	if v, ok := a.Payload["value"]; ok {
		value = v
	} else {
		rest := make(map[string]any, len(a.Payload))
		for k, v := range a.Payload {
			if k != "topic" && k != "key" {
				rest[k] = v
			}
		}
		value = rest
	}
	b, err := json.Marshal(value)
	if err != nil {
		return payloadError(IDKafka, "value", "is not JSON: "+err.Error())
	}
	var headers []Header
	if a.EventID != "" {
		headers = []Header{
			{Key: HeaderEventID, Value: []byte(a.EventID)},
			{Key: HeaderActionPosition, Value: []byte(a.Position)},
			{Key: HeaderIdempotency, Value: []byte(a.IdempotencyKey())},
		}
	}
	if err := k.p.Produce(ctx, topic, key, b, headers); err != nil {
		return NewRetriable(fmt.Errorf("kafka produce to %s: %w", topic, err))
	}
	return nil
}
