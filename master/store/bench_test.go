package store

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/benchtest"
	"github.com/squallhq/squall/internal/cputime"
)

// benchTree returns a tree whose ReplaceActive entry is exactly 1 KiB.
func benchTree(b *testing.B) *config.Node {
	b.Helper()
	size := func(tree *config.Node) int {
		data, err := encodeCommand(ReplaceActive{Tree: tree})
		if err != nil {
			b.Fatal(err)
		}
		return len(data)
	}
	tree := treeWith()
	for i := 0; ; i++ {
		more := treeWith(append(childNames(tree), fmt.Sprintf("c%02d", i))...)
		if size(more) > 1024 {
			break
		}
		tree = more
	}
	tree.Description = strings.Repeat("x", 1024-size(tree)+len(tree.Description))
	if n := size(tree); n != 1024 {
		b.Fatalf("entry of %d bytes", n)
	}
	return tree
}

// benchCluster starts 3 nodes with fsync on and the production raft
// timeouts (testConfig's; with shorter ones a CPU-starved leader of a
// loaded shared machine steps down in the middle of a run) and returns
// the leader.
func benchCluster(b *testing.B) *Store {
	nodes := newCluster(b, 3, func(_ int, c *Config) {
		c.Logger = slog.New(slog.DiscardHandler)
		c.Registerer = nil
	})
	return leaderOf(b, nodes)
}

// cpuTime returns the CPU time the process has used so far.
func cpuTime(*testing.B) time.Duration { d, _ := cputime.Process(); return d }

// reportLatency reports sequential writes' throughput and latencies.
func reportLatency(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	benchtest.Result{Latencies: lat, Elapsed: elapsed}.Report(b, "writes/s")
}

// benchCommands are the 1 KiB commands of the apply benchmarks:
//   - tree: ReplaceActive of a 1 KiB tree, which every node decodes and
//     validates (config.DecodeExport and config.Validate dominate CPU);
//   - light: CreateDraft with a long owner name, which costs little to
//     apply: the raft and state-file pipeline alone.
func benchCommands(b *testing.B) map[string]func() Command {
	tree := benchTree(b)
	const id0 = "0192d0b4-7cde-7000-8000-000000000000"
	base, err := encodeCommand(CreateDraft{ID: id0, Owner: "o", Now: time.UnixMilli(1_700_000_000_000)})
	if err != nil {
		b.Fatal(err)
	}
	owner := strings.Repeat("o", 1024-len(base)+1)
	if data, _ := encodeCommand(CreateDraft{ID: id0, Owner: owner, Now: time.UnixMilli(1_700_000_000_000)}); len(data) != 1024 {
		b.Fatalf("light entry of %d bytes", len(data))
	}
	var n atomic.Int64
	return map[string]func() Command{
		"tree": func() Command { return ReplaceActive{Tree: tree} },
		"light": func() Command {
			id := fmt.Sprintf("0192d0b4-7cde-7000-8000-%012d", n.Add(1))
			return CreateDraft{ID: id, Owner: owner, Now: time.UnixMilli(1_700_000_000_000)}
		},
	}
}

// BenchmarkApply measures sequential 1 KiB writes on a 3-node cluster with
// fsync: each waits for a quorum to store the entry and for the leader's
// state-file commit.
func BenchmarkApply(b *testing.B) {
	for _, name := range []string{"tree", "light"} {
		b.Run(name, func(b *testing.B) {
			leader := benchCluster(b)
			cmd := benchCommands(b)[name]
			ctx := b.Context()
			var lat []time.Duration
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				res, err := leader.Apply(ctx, nil, cmd())
				if err == nil {
					err = res.Err
				}
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat, time.Since(start))
		})
	}
}

// BenchmarkApplyConcurrent64 measures 64 concurrent writers of 1 KiB
// commands on a 3-node cluster with fsync.
func BenchmarkApplyConcurrent64(b *testing.B) {
	const writers = 64
	for _, name := range []string{"tree", "light"} {
		b.Run(name, func(b *testing.B) {
			leader := benchCluster(b)
			cmd := benchCommands(b)[name]
			ctx := b.Context()
			benchtest.Run(b, writers, func(_ int, i int64) error {
				res, err := leader.Apply(ctx, nil, cmd())
				if err == nil {
					err = res.Err
				}
				return err
			}).Report(b, "writes/s")
		})
	}
}
