package deadletters

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
)

// BenchmarkAPI_List lists a page of 50 from a topic of 10,000 dead
// letters of 1 KiB, reading them all (the default scan limit) to count
// their reasons: the cost of the console's Dead letters tab.
func BenchmarkAPI_List(b *testing.B) {
	w := newWorld(b, Default())
	value := make([]byte, 1<<10)
	recs := make([]kafkasource.Record, 0, 500)
	for i := range 10_000 {
		recs = append(recs, kafkasource.Record{Topic: testDLQ, Key: fmt.Appendf(nil, "tenant-%d", i%7), Value: value, Headers: []kafkasource.Header{
			{Key: deadletter.HeaderErrorStage, Value: []byte("action")},
			{Key: deadletter.HeaderErrorActions, Value: fmt.Appendf(nil, "0:action%d", i%5)},
			{Key: deadletter.HeaderError, Value: []byte("action 0: status 500")},
			{Key: deadletter.HeaderDeadAt, Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))},
		}})
		if len(recs) == cap(recs) {
			if err := w.writer.Write(b.Context(), recs...); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var p Page
		if code := w.do(http.MethodGet, Prefix, admin, nil, &p); code != http.StatusOK || p.Scanned != 10_000 || len(p.Reasons) != 5 {
			b.Fatalf("%d: scanned %d, %d reasons", code, p.Scanned, len(p.Reasons))
		}
	}
}
