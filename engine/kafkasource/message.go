package kafkasource

import (
	"time"

	"github.com/segmentio/kafka-go"
)

// Message is a fetched record. Its byte slices belong to the message: they
// are not reused by later fetches.
type Message struct {
	m kafka.Message
}

// Topic returns the record's topic.
func (m *Message) Topic() string { return m.m.Topic }

// Partition returns the record's partition.
func (m *Message) Partition() int { return m.m.Partition }

// Offset returns the record's offset in its partition.
func (m *Message) Offset() int64 { return m.m.Offset }

// Key returns the record's key (nil when it has none).
func (m *Message) Key() []byte { return m.m.Key }

// Value returns the record's value.
func (m *Message) Value() []byte { return m.m.Value }

// HighWaterMark returns the offset after the last record of the
// partition when this record was fetched: HighWaterMark() - Offset() - 1
// records followed it then.
func (m *Message) HighWaterMark() int64 { return m.m.HighWaterMark }

// Time returns the record's timestamp.
func (m *Message) Time() time.Time { return m.m.Time }

// Header returns the value of the first header named key.
func (m *Message) Header(key string) ([]byte, bool) {
	for i := range m.m.Headers {
		if m.m.Headers[i].Key == key {
			return m.m.Headers[i].Value, true
		}
	}
	return nil, false
}

// Headers returns a copy of the record's headers, in order.
func (m *Message) Headers() []Header {
	out := make([]Header, len(m.m.Headers))
	for i, h := range m.m.Headers {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// Record is a record to write.
type Record struct {
	// Topic, when set, replaces the writer's topic for this record.
	Topic string
	// Key decides the partition, unless ToPartition is set.
	Key []byte
	// ToPartition writes the record to Partition instead of the key's.
	ToPartition bool
	// Partition is the record's partition when ToPartition is set.
	Partition int
	// Value is the record value.
	Value []byte
	// Headers are the record headers, in order.
	Headers []Header
	// Time is the record timestamp; zero means now.
	Time time.Time
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Position is a point to commit in one partition of the source's topic.
type Position struct {
	Partition int
	// Next is the offset of the next record to consume: every record
	// before it was processed.
	Next int64
}

// Assignment is a member's share of the group in one generation.
type Assignment struct {
	// Generation counts the generations this Source took part in, from 1.
	Generation uint64
	// Joined is true while a generation is running.
	Joined bool
	// Partitions are the partitions of the topic assigned to this member
	// in the generation, sorted; empty when not Joined (or when the group
	// has more members than the topic has partitions).
	Partitions []int
}
