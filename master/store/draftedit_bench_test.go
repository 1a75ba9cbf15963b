package store

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/config/configtest"
)

// largeDraftCluster starts 3 nodes with fsync and raft timeouts of 1 s
// (lease 500 ms: a whole-tree entry of 5 MB takes long to replicate),
// makes configtest.LargeTree(rules) active and creates a draft of alice. opts adjust
// each store before it opens. It returns the leader and the draft's id.
func largeDraftCluster(b *testing.B, rules int, opts ...func(int, *Store)) (*Store, string) {
	nodes := newCluster(b, 3, func(_ int, c *Config) {
		c.Logger = slog.New(slog.DiscardHandler)
		c.Registerer = nil
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	}, opts...)
	leader := leaderOf(b, nodes)
	if _, err := leader.ReplaceActive(b.Context(), configtest.LargeTree(rules)); err != nil {
		b.Fatal(err)
	}
	id, err := leader.CreateDraft(b.Context(), "alice")
	if err != nil {
		b.Fatal(err)
	}
	return leader, id
}

// BenchmarkDraftRuleEdit20k measures one rule edit of a 20,000-rule draft
// on a 3-node cluster with fsync, as the API submits it (DraftEdit:
// "part") and as it did before (EditDraft of the whole tree, validated
// and encoded by the leader: "whole"). Besides the latency it reports the
// raft log bytes each edit appends and the growth of the leader's raft.db.
// Run with -benchtime=20x: the whole-tree edits take seconds each.
func BenchmarkDraftRuleEdit20k(b *testing.B) {
	leader, id := largeDraftCluster(b, 20_000)
	ctx := b.Context()
	path := []string{"root", "tenant7", "rules"}
	rule := func(i int) *config.Rule {
		return &config.Rule{Name: "rule_500", Description: fmt.Sprintf("edit %d", i), Active: i%2 == 0, Continue: true}
	}
	edits := map[string]func(i int) error{
		"part": func(i int) error {
			return leader.EditDraftPart(ctx, nil, id, "alice", &config.Edit{Op: config.EditUpdateRule, Path: path, RuleName: "rule_500", Rule: rule(i)})
		},
		"whole": func(i int) error {
			d, err := leader.Draft()
			if err != nil {
				return err
			}
			rs := d.Tree.Find(path[1:])
			_, j := rs.Rule("rule_500")
			rs.Rules[j] = rule(i)
			if err := config.Validate(d.Tree); err != nil {
				return err
			}
			return leader.EditDraft(ctx, id, "alice", d.Tree)
		},
	}
	raftDB := filepath.Join(leader.cfg.DataDir, raftDBName)
	for _, name := range []string{"part", "whole"} {
		b.Run(name, func(b *testing.B) {
			edit := edits[name]
			first, err := leader.logs.LastIndex()
			if err != nil {
				b.Fatal(err)
			}
			dbBefore := fileSize(b, raftDB)
			var lat []time.Duration
			i := 0
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if err := edit(i); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				i++
			}
			reportLatency(b, lat, time.Since(start))
			last, err := leader.logs.LastIndex()
			if err != nil {
				b.Fatal(err)
			}
			var logBytes int
			for idx := first + 1; idx <= last; idx++ {
				var l raft.Log
				if err := leader.logs.GetLog(idx, &l); err != nil {
					b.Fatal(err)
				}
				logBytes += len(l.Data)
			}
			b.ReportMetric(float64(logBytes)/float64(i), "log-bytes/edit")
			b.ReportMetric(float64(fileSize(b, raftDB)-dbBefore)/float64(i), "raftdb-growth-bytes/edit")
		})
	}
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
