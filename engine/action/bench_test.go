package action

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/squallhq/squall/engine/tree"
)

// benchEvent is the event of the action benchmarks: about 300 bytes.
const benchEvent = `{"type": "webhook", "created_ms": 1700000000000,
		"metadata": {"tenant_id": "master"},
		"payload": {"source": "github", "ref": "refs/heads/main", "repository": {"name": "squall", "id": 123456},
		"commits": [{"id": "0123456789abcdef", "message": "fix: archive paths", "author": "dev@example.com"}]}}`

// BenchmarkArchive measures archive actions through the registry (metrics
// included), with an event of about 300 bytes, as the engine runs them.
func BenchmarkArchive(b *testing.B) {
	event := payload(b, benchEvent)
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

// BenchmarkReloader_Run measures what the Reloader adds to a run (the
// count of actions in flight on the current registry), with a no-op
// executor, serially and from all cores; the registry alone for reference.
func BenchmarkReloader_Run(b *testing.B) {
	nop := ExecutorFunc(func(context.Context, tree.Action) error { return nil })
	deps := Deps{Executors: map[string]Executor{"nop": nop}}
	a := tree.Action{ID: "nop"}
	reg, err := NewRegistry(testConfig(), deps)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	rel, err := NewReloader(ReloaderConfig{Settings: new(testConfig())}, deps)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rel.Close() })
	for _, bc := range []struct {
		name string
		run  func(context.Context, tree.Action) error
	}{{"registry", reg.Run}, {"reloader", rel.Run}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.run(b.Context(), a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+" parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := bc.run(b.Context(), a); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReloader_Reload measures one reload of a settings file that
// enables http and archive: read, parse, validate, build, swap, and the
// close of the replaced registry.
func BenchmarkReloader_Reload(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "actions.json")
	content := fmt.Sprintf(`{"http": {"allowed_hosts": ["127.0.0.1"]}, "archive": {"base_path": %q, "default_path": "all.log"}}`, filepath.Join(dir, "archive"))
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
	r, err := NewReloader(ReloaderConfig{File: file}, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Reload(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
