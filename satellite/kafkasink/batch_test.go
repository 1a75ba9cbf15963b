package kafkasink

import (
	"bytes"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAppendRecordBatch decodes the record batches of appendRecordBatch
// with franz-go's protocol package, an encoder independent of ours.
func TestAppendRecordBatch(t *testing.T) {
	created := time.UnixMilli(1_700_000_000_123)
	w1 := &pendingWrite{msgs: []Message{
		{Key: []byte("tenant"), Value: []byte(`{"n":1}`), Time: created, Headers: []Header{
			{Key: "squall-event-id", Value: []byte("id-1")}, {Key: "empty", Value: []byte{}}, {Key: "null"},
		}},
		{Value: []byte(`{"n":2}`), Time: created.Add(-5 * time.Millisecond)}, // null key, earlier
	}}
	w2 := &pendingWrite{msgs: []Message{{Key: []byte("tenant"), Value: nil}}} // null value, no time
	const now = 1_700_000_009_000
	prefix := []byte("before")
	b := appendRecordBatch(bytes.Clone(prefix), []*pendingWrite{w1, w2}, 3, now)
	if !bytes.Equal(b[:len(prefix)], prefix) {
		t.Fatal("the bytes before the batch changed")
	}
	raw := b[len(prefix):]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if int(rb.Length) != len(raw)-12 || rb.Magic != 2 || rb.Attributes != 0 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 ||
		rb.PartitionLeaderEpoch != -1 || rb.ProducerID != -1 || rb.ProducerEpoch != -1 || rb.FirstSequence != -1 {
		t.Fatalf("batch header %+v", rb)
	}
	if rb.CRC != int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) {
		t.Fatal("CRC mismatch")
	}
	if rb.FirstTimestamp != created.UnixMilli() || rb.MaxTimestamp != now {
		t.Fatalf("timestamps %d, %d", rb.FirstTimestamp, rb.MaxTimestamp)
	}
	recs := rb.Records
	var got []kmsg.Record
	for len(recs) > 0 {
		var r kmsg.Record
		// A record: its varint length, then that many bytes.
		n, size := uvarint(recs)
		if err := r.ReadFrom(recs[:size+n]); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
		recs = recs[size+n:]
	}
	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
	check := func(i int, key, value []byte, ts int64, headers []kmsg.Header) {
		t.Helper()
		r := got[i]
		if int(r.OffsetDelta) != i || rb.FirstTimestamp+r.TimestampDelta64 != ts || !bytes.Equal(r.Key, key) || (r.Key == nil) != (key == nil) ||
			!bytes.Equal(r.Value, value) || (r.Value == nil) != (value == nil) || len(r.Headers) != len(headers) {
			t.Fatalf("record %d: %+v", i, r)
		}
		for j, h := range headers {
			if r.Headers[j].Key != h.Key || !bytes.Equal(r.Headers[j].Value, h.Value) || (r.Headers[j].Value == nil) != (h.Value == nil) {
				t.Fatalf("record %d header %d: %+v", i, j, r.Headers[j])
			}
		}
	}
	check(0, []byte("tenant"), []byte(`{"n":1}`), created.UnixMilli(), []kmsg.Header{
		{Key: "squall-event-id", Value: []byte("id-1")}, {Key: "empty", Value: []byte{}}, {Key: "null"},
	})
	check(1, nil, []byte(`{"n":2}`), created.UnixMilli()-5, nil)
	check(2, []byte("tenant"), nil, now, nil)
}

// uvarint returns the length of the zigzag varint at the start of b and its
// value.
func uvarint(b []byte) (n, v int) {
	var x uint64
	for shift := 0; ; shift += 7 {
		c := b[n]
		n++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return n, int(int64(x>>1) ^ -int64(x&1))
}

// BenchmarkAppendRecordBatch encodes 16 records like the satellite's per
// batch.
func BenchmarkAppendRecordBatch(b *testing.B) {
	w := &pendingWrite{}
	for range 16 {
		w.msgs = append(w.msgs, Message{Key: []byte("tenant"), Value: bytes.Repeat([]byte("x"), 130), Headers: []Header{
			{Key: "squall-event-id", Value: []byte("0192f0e4-7b7c-7d2a-9c1e-3f4a5b6c7d8e")},
			{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		}})
	}
	buf := make([]byte, 0, 8<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRecordBatch(buf[:0], []*pendingWrite{w}, 16, 1_700_000_000_000)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/16, "ns/record")
}
