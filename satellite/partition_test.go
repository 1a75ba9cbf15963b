package satellite

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

// TestSatellite_PartitionRefused loads the satellite with the events of six
// tenants, spread over three partitions, which the sink sends in produce
// requests of several partitions; for a while the broker leaves one
// partition out of every request (as a broker that lost its leadership
// would refuse it). The events of that partition go to the spool and the
// others to Kafka; once the partition is back, the spool drains. Every event
// answered 200 must be in the topic, in order per tenant.
func TestSatellite_PartitionRefused(t *testing.T) {
	t.Parallel()
	const tenants, perTenant = 6, 40
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	files := map[string]string{}
	for i := range tenants {
		files[fmt.Sprintf("t%d.json", i)] = fmt.Sprintf(`{"id": "t%d", "token": "tok-0123456789abc", "tenant_id": "tenant-%d",
			"collector_config": {"event_type": "webhook", "payload": {"source": "test", "all": "${@}"}}}`, i, i)
	}
	cfg := testConfig(t, b.Addr, writeHooks(t, files), "")
	s := start(t, cfg)

	var faulty, multi atomic.Bool
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ProduceRequest)
		for i := range r.Topics {
			ps := r.Topics[i].Partitions
			if len(ps) > 1 {
				multi.Store(true)
			}
			if faulty.Load() {
				r.Topics[i].Partitions = slices.DeleteFunc(ps, func(p kmsg.ProduceRequestTopicPartition) bool { return p.Partition == 1 })
			}
		}
		return nil, nil, false
	})

	var acked sync.Map // "tenant/seq"
	var count atomic.Int64
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: tenants}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for w := range tenants {
		wg.Go(func() {
			for seq := 0; seq < perTenant; {
				status, _, err := postTo(client, s.url, fmt.Sprintf("t%d", w), "tok-0123456789abc", fmt.Sprintf(`{"worker": %d, "seq": %d}`, w, seq), nil)
				if err == nil && status == http.StatusOK {
					acked.Store(fmt.Sprintf("%d/%d", w, seq), true)
					count.Add(1)
					seq++
					continue
				}
				time.Sleep(10 * time.Millisecond) // refused: send it again, as a webhook sender would
			}
		})
	}
	polltest.Wait(t, "events before the fault", 20*time.Second, func() bool { return count.Load() >= tenants*5 })
	faulty.Store(true)
	polltest.Wait(t, "the switch to the spool", 20*time.Second, func() bool { return s.fwd.spooling.Load() })
	from := count.Load()
	polltest.Wait(t, "events during the fault", 20*time.Second, func() bool { return count.Load() >= min(from+tenants*5, tenants*perTenant) })
	faulty.Store(false)
	wg.Wait()
	polltest.Wait(t, "the spool drained", 30*time.Second, func() bool { return !s.fwd.spooling.Load() && s.spool.Stats().Records == 0 })

	if !multi.Load() {
		t.Error("no produce request carried several partitions")
	}
	if n := testutil.ToFloat64(s.fwd.m.drained); n == 0 {
		t.Error("no event went through the spool")
	}
	seen := map[string]bool{}
	firsts := map[int64][]int64{}
	inPartition1 := 0
	for _, r := range b.Records(t, topic) {
		p := eventPayload(t, r)
		w, _ := p["worker"].(interface{ Int64() (int64, error) }).Int64()
		seq, _ := p["seq"].(interface{ Int64() (int64, error) }).Int64()
		k := fmt.Sprintf("%d/%d", w, seq)
		if !seen[k] {
			firsts[w] = append(firsts[w], seq)
		}
		seen[k] = true
		if r.Partition == 1 {
			inPartition1++
		}
	}
	if inPartition1 == 0 {
		t.Fatal("no tenant's events in partition 1: the fault touched nothing")
	}
	acked.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			t.Errorf("event %s answered 200 is not in the topic", k)
		}
		return true
	})
	for w, seqs := range firsts {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("tenant %d: event %d after %d", w, seqs[i], seqs[i-1])
			}
		}
	}
}
