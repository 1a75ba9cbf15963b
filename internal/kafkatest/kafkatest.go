// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's
// kfake) on the loopback interface for the tests of the satellite's producer
// and the engine's consumer, and reads topics and group offsets back with
// franz-go's client, a Kafka client independent of the kafka-go code under
// test.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/joinmute"
)

// Broker is a one-node kfake cluster listening on 127.0.0.1. It is closed at
// the end of the test.
type Broker struct {
	// Addr is the broker's host:port; it stays the same across Restart.
	Addr string

	t    testing.TB
	port int
	opts []kfake.Opt
	c    *kfake.Cluster

	// gate holds the broker's connections while it is frozen.
	gate gate

	// sleeps are the requests slept by SleepControl (sleeps.go).
	sleeps sleeps
}

// Config describes a Broker.
type Config struct {
	// Topics are created with Partitions partitions each.
	Topics []string
	// Partitions defaults to 3.
	Partitions int32
	// DataDir, when set, persists the records so that they survive Stop
	// and Restart.
	DataDir string
	// Opts are more kfake options (SASL, TLS, broker configs).
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
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(cfg.Partitions, cfg.Topics...))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	opts = append(opts, cfg.Opts...)
	b := &Broker{t: t, opts: opts}
	b.start(0)
	t.Cleanup(b.Stop)
	return b
}

// start starts the cluster on port (0: any free port).
func (b *Broker) start(port int) {
	b.t.Helper()
	opts := append(slices.Clone(b.opts), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, err
		}
		// The broker keeps a member whose JoinGroup waits as Kafka
		// does (package joinmute).
		return joinmute.Wrap(gatedListener{Listener: ln, g: &b.gate}), nil
	}))
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		b.t.Fatalf("start kfake: %v", err)
	}
	b.c = c
	b.sleeps.start()
	b.Addr = c.ListenAddrs()[0]
	_, p, _ := net.SplitHostPort(b.Addr)
	b.port, _ = strconv.Atoi(p)
}

// Stop stops the broker: its port refuses connections until Restart.
// A frozen broker is thawed first, and the requests slept by SleepControl
// are dropped first.
func (b *Broker) Stop() {
	b.gate.set(false)
	if b.c != nil {
		b.sleeps.stop(b.t)
		b.c.Close()
		b.c = nil
	}
}

// Freeze makes the broker stop answering, as a broker process stopped with
// SIGSTOP or cut off by the network would: its connections stay open,
// and what clients send it is neither read nor answered, until Thaw. New
// connections are accepted (the kernel's backlog) and held the same way.
func (b *Broker) Freeze() { b.gate.set(true) }

// Thaw makes a frozen broker answer again; it then reads what was sent to
// it meanwhile.
func (b *Broker) Thaw() { b.gate.set(false) }

// Restart starts a stopped broker again on the same address (and DataDir).
func (b *Broker) Restart() {
	b.t.Helper()
	if b.c != nil {
		b.t.Fatal("kafkatest: restart of a running broker")
	}
	b.start(b.port)
}

// Cluster returns the running kfake cluster.
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// Header is a record header.
type Header struct {
	// Key is the header name.
	Key string
	// Value is the header value.
	Value string
}

// Record is a record read back from a topic.
type Record struct {
	// Partition is the record's partition.
	Partition int32
	// Offset is the record's offset in its partition.
	Offset int64
	// Key is the record key.
	Key string
	// Value is the record value.
	Value []byte
	// Headers are the record headers, in order.
	Headers []Header
	// Timestamp is the record timestamp.
	Timestamp time.Time
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

// Records reads every record of topic, from the start of each partition to
// its end at the time of the call, in partition and offset order.
func (b *Broker) Records(t testing.TB, topic string, opts ...kgo.Opt) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends := b.EndOffsets(t, topic, opts...)
	want := make(map[int32]kgo.Offset)
	var total int64
	for p, end := range ends {
		if end > 0 {
			want[p] = kgo.NewOffset().AtStart()
			total += end
		}
	}
	if total == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.DisableClientMetrics(),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	defer cl.Close()
	var out []Record
	next := make(map[int32]int64)
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: read %s: timed out with %d of %d records", topic, len(out), total)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("kafkatest: fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			rec := Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value, Timestamp: r.Timestamp}
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
func (b *Broker) EndOffsets(t testing.TB, topic string, opts ...kgo.Opt) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := endOffsets(ctx, b.Addr, topic, opts)
	if err != nil {
		t.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	return ends
}

// Committed returns the offsets group committed for topic, by partition
// (partitions without a commit are absent).
func (b *Broker) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

// endOffsets returns the end offset of every partition of topic.
func endOffsets(ctx context.Context, addr, topic string, opts []kgo.Opt) (map[int32]int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, t := range mresp.Topics {
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata error code %d", t.ErrorCode)
		}
		for _, p := range t.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = p.Partition
			lp.Timestamp = -1 // latest
			lt.Partitions = append(lt.Partitions, lp)
		}
	}
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := make(map[int32]int64)
	for _, t := range lresp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("list offsets error code %d", p.ErrorCode)
			}
			ends[p.Partition] = p.Offset
		}
	}
	return ends, nil
}

// gate holds reads and writes while it is closed. Its zero value is open.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // nil while open; closed by the thaw
}

func (g *gate) set(frozen bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case frozen && g.open == nil:
		g.open = make(chan struct{})
	case !frozen && g.open != nil:
		close(g.open)
		g.open = nil
	}
}

// wait returns once the gate is open.
func (g *gate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open != nil {
		<-open
	}
}

// gatedListener accepts connections that pass through its gate.
type gatedListener struct {
	net.Listener
	g *gate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return gatedConn{Conn: c, g: l.g}, nil
}

// gatedConn reads and writes only while its gate is open: a read that
// returns while the gate is closed hands its bytes over after the thaw.
type gatedConn struct {
	net.Conn
	g *gate
}

func (c gatedConn) Read(p []byte) (int, error) {
	c.g.wait()
	n, err := c.Conn.Read(p)
	c.g.wait()
	return n, err
}

func (c gatedConn) Write(p []byte) (int, error) {
	c.g.wait()
	return c.Conn.Write(p)
}
