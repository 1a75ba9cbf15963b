// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's
// kfake) on the loopback interface for the engine's tests, and reads topics
// and group offsets back with franz-go's client, a Kafka client independent
// of the kafka-go consumer under test.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is a one-node kfake cluster listening on 127.0.0.1, closed at the
// end of the test.
type Broker struct {
	// Addr is the broker's host:port.
	Addr string
	c    *kfake.Cluster
}

// Config describes a Broker.
type Config struct {
	// Topics are created with Partitions partitions each.
	Topics []string
	// Partitions defaults to 3.
	Partitions int32
	// Opts are more kfake options.
	Opts []kfake.Opt
}

// Start starts a broker.
func Start(t testing.TB, cfg Config) *Broker {
	t.Helper()
	if cfg.Partitions == 0 {
		cfg.Partitions = 3
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
		// Engines of the tests use short sessions.
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, "127.0.0.1:0")
		}),
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(cfg.Partitions, cfg.Topics...))
	}
	opts = append(opts, cfg.Opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	b := &Broker{Addr: c.ListenAddrs()[0], c: c}
	t.Cleanup(c.Close)
	return b
}

// Header is a record header.
type Header struct {
	Key   string
	Value string
}

// Record is a record read back from a topic.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     []byte
	Headers   []Header
}

// Header returns the value of the first header named key.
func (r Record) Header(key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return "", false
}

func (b *Broker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	return cl
}

// Records reads every record of topic, from the start of each partition to
// its end at the time of the call, in partition and offset order.
func (b *Broker) Records(t testing.TB, topic string) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ends := b.EndOffsets(t, topic)
	want := make(map[int32]kgo.Offset)
	for p, end := range ends {
		if end > 0 {
			want[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(want) == 0 {
		return nil
	}
	cl := b.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	var out []Record
	next := make(map[int32]int64)
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: read %s: timed out with %d records", topic, len(out))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("kafkatest: fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			rec := Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: string(h.Value)})
			}
			out = append(out, rec)
			next[r.Partition] = r.Offset + 1
		})
		done = true
		for p, end := range ends {
			if next[p] < end {
				done = false
			}
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// EndOffsets returns the end offset of every partition of topic.
func (b *Broker) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	cl := b.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafkatest: metadata %s: %v", topic, err)
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, tp := range mresp.Topics {
		if tp.ErrorCode != 0 {
			t.Fatalf("kafkatest: metadata %s: error code %d", topic, tp.ErrorCode)
		}
		for _, p := range tp.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = p.Partition
			lp.Timestamp = -1 // latest
			lt.Partitions = append(lt.Partitions, lp)
		}
	}
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafkatest: list offsets %s: %v", topic, err)
	}
	ends := make(map[int32]int64)
	for _, tp := range lresp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("kafkatest: list offsets %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
			}
			ends[p.Partition] = p.Offset
		}
	}
	return ends
}

// Committed returns the offsets group committed for topic, by partition
// (partitions without a commit are absent).
func (b *Broker) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	cl := b.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range b.EndOffsets(t, topic) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafkatest: offset fetch %s: %v", group, err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("kafkatest: offset fetch %s: error code %d", group, resp.ErrorCode)
	}
	out := make(map[int32]int64)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("kafkatest: offset fetch %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// String describes the broker.
func (b *Broker) String() string { return fmt.Sprintf("kfake@%s", b.Addr) }
