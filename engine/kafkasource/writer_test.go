package kafkasource

import (
	"testing"

	"github.com/squallhq/squall/internal/kafkatest"
)

// TestWriter_RecordTopic checks that a record naming a topic goes there and
// the others to the writer's topic.
func TestWriter_RecordTopic(t *testing.T) {
	t.Parallel()
	const other = "squall.other"
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic, other}, Partitions: 2})
	w := newWriter(t, testDial(b.Addr))
	if w.Topic() != testTopic {
		t.Fatalf("Topic() = %q", w.Topic())
	}
	recs := []Record{
		{Key: []byte("a"), Value: []byte("1")},
		{Topic: other, Key: []byte("b"), Value: []byte("2")},
		{Topic: other, Value: []byte("3")},
	}
	if err := w.Write(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
	if got := b.Records(t, testTopic); len(got) != 1 || string(got[0].Value) != "1" || got[0].Key != "a" {
		t.Errorf("%s holds %+v", testTopic, got)
	}
	got := b.Records(t, other)
	values := map[string]string{}
	for _, r := range got {
		values[string(r.Value)] = r.Key
	}
	if len(got) != 2 || values["2"] != "b" || values["3"] != "" {
		t.Errorf("%s holds %+v", other, got)
	}
}
