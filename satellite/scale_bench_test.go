package satellite

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/benchtest"
	"github.com/squallhq/squall/internal/heaptest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/webhooks"
)

// scaleHooks returns n webhook files, hook_0 … hook_{n-1}, each like
// plainHook with its own id and token.
func scaleHooks(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		id := fmt.Sprintf("hook_%d", i)
		files[id+".json"] = strings.Replace(strings.Replace(plainHook, `"plain"`, `"`+id+`"`, 1), `"tok-0123456789abc"`, fmt.Sprintf(`"tok-%016d"`, i), 1)
	}
	return files
}

// BenchmarkScaleWebhooks is the webhook-files curve of docs/BENCHMARKS.md,
// for 1 to 10,000 webhook files in the folder:
//
//   - reload: loading the folder, which a satellite does on any change
//     (ns/op), and set-KiB, the heap the loaded set keeps;
//   - intake: a satellite serving them, with an in-process broker, under
//     64 connections posting to webhooks picked round robin among the
//     first 1,000 (req/s, p99-ms).
//
// Run the two apart (a fixed count of reloads of 10,000 files is long):
//
//	go test ./satellite -run '^$' -bench 'BenchmarkScaleWebhooks/.*/reload'
//	go test ./satellite -run '^$' -bench 'BenchmarkScaleWebhooks/.*/intake' -benchtime 5000x
func BenchmarkScaleWebhooks(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1_000, 10_000} {
		files := scaleHooks(n)
		b.Run(fmt.Sprintf("files=%d/reload", n), func(b *testing.B) {
			dir := writeHooks(b, files)
			before := heaptest.Live()
			set, problems, err := webhooks.LoadDir(dir)
			if err != nil || len(problems) != 0 || len(set) != n {
				b.Fatalf("loaded %d of %d: %v %v", len(set), n, problems, err)
			}
			kept := heaptest.Live() - min(before, heaptest.Live())
			runtime.KeepAlive(set)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := webhooks.LoadDir(dir); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(kept)/(1<<10), "set-KiB")
		})
		b.Run(fmt.Sprintf("files=%d/intake", n), func(b *testing.B) {
			broker := kafkatest.Start(b, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
			cfg := testConfig(b, broker.Addr, writeHooks(b, files), "")
			cfg.AckTimeout = DefaultAckTimeout
			s := start(b, cfg)
			urls := make([]string, min(n, 1000))
			for i := range urls {
				urls[i] = fmt.Sprintf("%s/engine/webhook/event/hook_%d?token=tok-%016d", s.url, i, i)
			}
			scaleLoad(b, urls, 64)
		})
	}
}

// scaleLoad posts b.N small JSON bodies over conns connections, to urls
// round robin, and reports req/s and the latencies.
func scaleLoad(b *testing.B, urls []string, conns int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	body := []byte(`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`)
	benchtest.Run(b, conns, func(_ int, i int64) error {
		resp, err := client.Post(urls[int(i)%len(urls)], "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}).Report(b, "req/s")
}
