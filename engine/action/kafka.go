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
	Produce(ctx context.Context, topic string, key, value []byte) error
}

// ProducerFunc adapts a function to [Producer].
type ProducerFunc func(ctx context.Context, topic string, key, value []byte) error

// Produce calls f.
func (f ProducerFunc) Produce(ctx context.Context, topic string, key, value []byte) error {
	return f(ctx, topic, key, value)
}

// kafkaExecutor produces one message per action. Payload: topic (string;
// default kafka.default_topic; must be the default topic or in
// kafka.allowed_topics), key (optional string) and value (any JSON; default
// the payload without topic and key). A producer failure is retriable.
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
	if err := k.p.Produce(ctx, topic, key, b); err != nil {
		return NewRetriable(fmt.Errorf("kafka produce to %s: %w", topic, err))
	}
	return nil
}
