package action

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// TestBuiltinIDs checks BuiltinIDs against a registry with every executor
// enabled: the list is what NewRegistry can build, no more, no less.
func TestBuiltinIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filetest.Write(t, dir, "token", "t0ken\n")
	cfg := testConfig()
	cfg.Archive.BasePath, cfg.Archive.DefaultPath = filepath.Join(dir, "archive"), "/all.log"
	cfg.Script.AllowedDir = dir
	cfg.HTTP.AllowedHosts = []string{"example.com"}
	cfg.Kafka.DefaultTopic = "out"
	cfg.Finding.MasterURLs, cfg.Finding.TokenFile = []string{"http://127.0.0.1:1"}, token
	cfg.Elasticsearch.DefaultEndpoint = "http://127.0.0.1:1"
	r, _ := newTestRegistry(t, cfg, Deps{Producer: ProducerFunc(func(context.Context, string, []byte, []byte, []Header) error { return nil })})
	if got, want := r.IDs(), BuiltinIDs(); !slices.Equal(got, want) {
		t.Errorf("a registry with every executor enabled has %v; BuiltinIDs says %v", got, want)
	}
	if !slices.IsSorted(BuiltinIDs()) {
		t.Errorf("BuiltinIDs %v is not sorted", BuiltinIDs())
	}
}
