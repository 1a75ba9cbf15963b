package action

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// produced is one message a fake producer received.
type produced struct{ topic, key, value string }

// The real producer (the engine's Kafka writer against a kfake broker) is
// tested in the engine package; these tests check the payload contract with
// a func-field fake.
func TestKafkaExecutor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		fail    error
		want    *produced // nil: nothing produced
		wantErr string
		retry   bool
	}{
		{name: "default topic, value is the rest", payload: `{"a": 1, "b": [true, null]}`,
			want: &produced{"out", "", `{"a":1,"b":[true,null]}`}},
		{name: "allowed topic with key and value", payload: `{"topic": "alerts", "key": "k1", "value": "text"}`,
			want: &produced{"alerts", "k1", `"text"`}},
		{name: "default topic named", payload: `{"topic": "out", "value": {"x": 1.50}}`,
			want: &produced{"out", "", `{"x":1.50}`}},
		{name: "rest drops topic and key", payload: `{"topic": "alerts", "key": "k", "n": 2}`,
			want: &produced{"alerts", "k", `{"n":2}`}},
		{name: "null key", payload: `{"key": null, "value": 1}`, want: &produced{"out", "", `1`}},
		{name: "value null", payload: `{"value": null}`, want: &produced{"out", "", `null`}},
		{name: "topic not allowed", payload: `{"topic": "secret"}`, wantErr: "kafka.allowed_topics"},
		{name: "topic not a string", payload: `{"topic": 1}`, wantErr: "non-empty string"},
		{name: "key not a string", payload: `{"key": 1}`, wantErr: `"key" must be a string`},
		{name: "broker error", payload: `{"value": 1}`, fail: errors.New("leader not available"),
			wantErr: "kafka produce to out: leader not available", retry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []produced
			p := ProducerFunc(func(_ context.Context, topic string, key, value []byte, _ []Header) error {
				if tt.fail != nil {
					return tt.fail
				}
				mu.Lock()
				defer mu.Unlock()
				got = append(got, produced{topic, string(key), string(value)})
				return nil
			})
			k := &kafkaExecutor{p: p, def: "out", allowed: []string{"alerts"}}
			err := k.Execute(t.Context(), testAction("kafka", payload(t, tt.payload)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || Retriable(err) != tt.retry {
					t.Fatalf("Execute: %v (retriable %v), want %q (retriable %v)", err, Retriable(err), tt.wantErr, tt.retry)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != *tt.want {
				t.Fatalf("produced %+v, want %+v", got, *tt.want)
			}
		})
	}
}

func TestKafkaExecutor_noDefaultTopic(t *testing.T) {
	t.Parallel()
	k := &kafkaExecutor{p: ProducerFunc(func(context.Context, string, []byte, []byte, []Header) error { return nil }), allowed: []string{"a"}}
	if err := k.Execute(t.Context(), testAction("kafka", map[string]any{"v": 1})); !errors.Is(err, ErrInvalidPayload) {
		t.Fatalf("Execute: %v, want ErrInvalidPayload", err)
	}
}

func TestRegistry_kafkaNeedsProducer(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Kafka.DefaultTopic = "out"
	r, _ := newTestRegistry(t, cfg, Deps{})
	if _, ok := r.entries[IDKafka]; ok {
		t.Fatal("kafka registered without a producer")
	}
	r2, _ := newTestRegistry(t, cfg, Deps{Producer: ProducerFunc(func(context.Context, string, []byte, []byte, []Header) error { return nil })})
	if _, ok := r2.entries[IDKafka]; !ok {
		t.Fatal("kafka not registered with a producer")
	}
	r3, _ := newTestRegistry(t, testConfig(), Deps{Producer: ProducerFunc(func(context.Context, string, []byte, []byte, []Header) error { return nil })})
	if _, ok := r3.entries[IDKafka]; ok {
		t.Fatal("kafka registered without a topic")
	}
}
