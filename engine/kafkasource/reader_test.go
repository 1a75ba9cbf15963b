package kafkasource

import (
	"fmt"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
)

// TestReader_Read reads ranges of partitions outside any group, and a
// record written ToPartition lands in its partition whatever its key.
func TestReader_Read(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	w := newWriter(t, testDial(b.Addr))
	start := time.Now()
	for i := range 30 {
		rec := Record{Key: []byte("same key"), Value: fmt.Appendf(nil, "%d", i), ToPartition: true, Partition: i % 3}
		if err := w.Write(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewReader(testDial(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := r.Partitions(t.Context(), testTopic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("partitions %+v", parts)
	}
	for _, p := range parts {
		if p.First != 0 || p.End != 10 {
			t.Errorf("partition %+v, want 10 records", p)
		}
		var values []string
		next, err := r.Read(t.Context(), testTopic, p.Partition, 2, p.End, 1<<20, func(m *Message) bool {
			values = append(values, string(m.Value()))
			return len(values) < 5
		})
		if err != nil {
			t.Fatal(err)
		}
		// Records 2 to 6 of the partition: values p+6, p+9, …
		if next != 7 || len(values) != 5 || values[0] != fmt.Sprint(p.Partition+6) {
			t.Errorf("partition %d: next %d, values %v", p.Partition, next, values)
		}
		// A byte budget stops the read early.
		n := 0
		next, err = r.Read(t.Context(), testTopic, p.Partition, 0, p.End, 1, func(*Message) bool { n++; return true })
		if err != nil || next >= p.End || n == 0 || next != int64(n) {
			t.Errorf("partition %d: with a 1-byte budget: next %d after %d records, %v", p.Partition, next, n, err)
		}
		off, err := r.OffsetAt(t.Context(), testTopic, p.Partition, start.Add(-time.Hour))
		if err != nil || off != 0 {
			t.Errorf("OffsetAt an hour before: %d %v", off, err)
		}
		off, err = r.OffsetAt(t.Context(), testTopic, p.Partition, time.Now().Add(time.Hour))
		if err != nil || off != p.End {
			t.Errorf("OffsetAt in an hour: %d %v, want the end %d", off, err, p.End)
		}
	}
	if _, err := r.Partitions(t.Context(), "no.such.topic"); err == nil {
		t.Error("the partitions of a missing topic: no error")
	}
}
