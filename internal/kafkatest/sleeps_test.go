package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// TestBroker_StopAfterRelease stops brokers right after releasing the
// produce request they hold, while the broker takes the request back: Stop
// waits for it, and the leak check of TestMain finds none of the brokers'
// goroutines left (a kfake cluster closed while it resumes the request
// deadlocks its loop).
func TestBroker_StopAfterRelease(t *testing.T) {
	for range 100 {
		b := Start(t, Config{Topics: []string{"t"}, Partitions: 1})
		cl, produced, release := produceHeld(t, b)
		release()
		b.Stop()
		cl.Close() // fails the record if the broker dropped it
		<-produced
	}
}

// TestBroker_StopWhileHeld stops a broker that holds a produce request: Stop
// returns, and the record is not acknowledged.
func TestBroker_StopWhileHeld(t *testing.T) {
	b := Start(t, Config{Topics: []string{"t"}, Partitions: 1})
	cl, produced, release := produceHeld(t, b)
	b.Stop()
	release()
	cl.Close()
	if err := <-produced; err == nil {
		t.Fatal("the held record was acknowledged")
	}
}

// produceHeld sends a record to b with a new client and returns once b
// holds its produce request; produced receives the record's outcome.
func produceHeld(t *testing.T, b *Broker) (cl *kgo.Client, produced <-chan error, release func()) {
	t.Helper()
	held, release := b.HoldProduce(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableClientMetrics(), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	out := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("held")}, func(_ *kgo.Record, err error) { out <- err })
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the broker did not receive the produce request within 10s")
	}
	return cl, out, release
}
