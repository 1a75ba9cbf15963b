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
// goroutines left (a cluster closed while it resumes the request deadlocks
// its loop).
func TestBroker_StopAfterRelease(t *testing.T) {
	for range 30 {
		b := Start(t, Config{Topics: []string{"t"}, Partitions: 1})
		held, release := b.HoldProduce(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableClientMetrics(),
			kgo.RecordRetries(1), kgo.RequestTimeoutOverhead(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		produced := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("held")}, func(_ *kgo.Record, err error) { produced <- err })
		<-held
		release()
		b.Stop()
		cl.Close() // fails the record if the broker dropped it
		<-produced
		cancel()
	}
}

// TestBroker_StopWhileHeld stops a broker that holds a produce request: Stop
// returns, and the record is not acknowledged.
func TestBroker_StopWhileHeld(t *testing.T) {
	b := Start(t, Config{Topics: []string{"t"}, Partitions: 1})
	held, release := b.HoldProduce(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableClientMetrics(), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	produced := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("held")}, func(_ *kgo.Record, err error) { produced <- err })
	<-held
	b.Stop()
	release()
	cl.Close()
	if err := <-produced; err == nil {
		t.Fatal("the held record was acknowledged")
	}
}
