package main

import (
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/kafkatest"
)

// TestDeadLettersCommand lists, shows and replays a dead letter through a
// master process started with --kafka-brokers, with squall deadletters.
func TestDeadLettersCommand(t *testing.T) {
	t.Parallel()
	const dlq, events = "squall.events.dlq", "squall.events"
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{dlq, events}, Partitions: 1})
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{b.Addr}, Timeout: 2 * time.Second}, Topic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}()
	err = w.Write(t.Context(), kafkasource.Record{Key: []byte("tenant-1"), Value: []byte(`{"type":"alert"}`), Headers: []kafkasource.Header{
		{Key: "squall-event-id", Value: []byte("ev-1")},
		{Key: "squall-webhook", Value: []byte("github")},
		{Key: deadletter.HeaderError, Value: []byte("action 0 (http): status 500")},
		{Key: deadletter.HeaderErrorStage, Value: []byte("action")},
		{Key: deadletter.HeaderErrorActions, Value: []byte("0:http")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	base := startMaster(t, "--kafka-brokers", b.Addr, "--allow-unsigned-tokens")
	tokenFile, _ := adminTokenFile(t, t.TempDir())
	flags := []string{"--master", base, "--token-file", tokenFile}
	id := dlq + "/0/0"

	out := mustRun(t, append([]string{"deadletters", "list", "--since", "1h"}, flags...)...)
	if !strings.Contains(out, id) || !strings.Contains(out, "action http") || !strings.Contains(out, "1 matching of 1 records read") {
		t.Errorf("list:\n%s", out)
	}
	out = mustRun(t, append([]string{"deadletters", "show", id}, flags...)...)
	if !strings.Contains(out, `"type": "alert"`) || !strings.Contains(out, `"webhook": "github"`) {
		t.Errorf("show:\n%s", out)
	}
	for i, want := range []string{"\treplayed\t", "\talready_replayed\t"} {
		out = mustRun(t, append([]string{"deadletters", "replay", id}, flags...)...)
		if !strings.Contains(out, id+want) {
			t.Errorf("replay %d:\n%s", i, out)
		}
	}
	if recs := b.Records(t, events); len(recs) != 1 {
		t.Errorf("%d records replayed to %s, want 1", len(recs), events)
	}
	// A missing one fails the command; bad input is refused with a reason.
	for _, args := range [][]string{{"replay", dlq + "/0/99"}, {"replay"}, {"list", "--stage", "nope"}, {"show", "nope"}} {
		if code, stdout, stderr := runBinary(t, append(append([]string{"deadletters"}, args...), flags...)...); code == 0 {
			t.Errorf("deadletters %v: no error:\n%s%s", args, stdout, stderr)
		}
	}
}
