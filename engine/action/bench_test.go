package action

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/squallhq/squall/engine/tree"
)

// BenchmarkArchive measures archive actions through the registry (metrics
// included), with an event of about 300 bytes, as the engine runs them.
func BenchmarkArchive(b *testing.B) {
	event := payload(b, `{"type": "webhook", "created_ms": 1700000000000,
		"metadata": {"tenant_id": "master"},
		"payload": {"source": "github", "ref": "refs/heads/main", "repository": {"name": "squall", "id": 123456},
		"commits": [{"id": "0123456789abcdef", "message": "fix: archive paths", "author": "dev@example.com"}]}}`)
	for _, bc := range []struct {
		name     string
		files    int
		parallel bool
	}{
		{"one file", 1, false},
		{"16 files", 16, false},
		{"16 files parallel", 16, true},
		{"256 files over 64 open", 256, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Archive.BasePath = filepath.Join(b.TempDir(), "archive")
			cfg.Archive.DefaultPath = "all.log"
			cfg.Archive.Paths = map[string]string{"t": "/by-tenant/${tenant}/events.log"}
			r, _ := newTestRegistry(b, cfg, Deps{})
			actions := make([]tree.Action, bc.files)
			for i := range actions {
				actions[i] = tree.Action{ID: IDArchive, Payload: map[string]any{
					"event": event, "archive_type": "t", "tenant": fmt.Sprint("tenant-", i),
				}}
			}
			b.ReportAllocs()
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						if err := r.Run(b.Context(), actions[i%len(actions)]); err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
			} else {
				i := 0
				for b.Loop() {
					if err := r.Run(b.Context(), actions[i%len(actions)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
