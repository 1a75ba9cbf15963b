package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/internal/logtest"
)

// produce writes recs to the events topic (squall.events) of the broker
// at addr.
func produce(t testing.TB, addr string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("squall.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// firstDeadLetter returns the first record of the dead-letter topic
// (squall.events.dlq) of the broker at addr, waiting up to d for it; the
// engine's logs say why none came.
func firstDeadLetter(t testing.TB, addr string, d time.Duration, logs *logtest.Buffer) *kgo.Record {
	t.Helper()
	dlq, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("squall.events.dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for {
		fs := dlq.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no dead letter within %s:\n%s", d, logs.String())
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}
