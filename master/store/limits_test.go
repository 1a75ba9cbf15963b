package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// TestStore_TreeLimitsReplaceRestore: the direct replacement of the active
// tree and a restore (from memory or a file) refuse a tree over the limits
// with a *config.LimitError, before anything is submitted: the state and
// its index do not change.
func TestStore_TreeLimitsReplaceRestore(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, nil)
	s := nodes[0]
	if _, err := s.ReplaceActive(ctxTimeout(t, 10e9), treeWith("kept")); err != nil {
		t.Fatal(err)
	}
	longName := treeWith(strings.Repeat("n", config.MaxNameLength+1))
	many := make([]string, config.MaxNodes)
	for i := range many {
		many[i] = fmt.Sprintf("n%d", i)
	}
	tooMany := treeWith(many...) // the root and MaxNodes children

	file := func(b *Backup) []byte {
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ok := treeWith("ok")
	for _, tc := range []struct {
		name  string
		do    func(ctx context.Context) error
		limit string
	}{
		{"replace: a long name", func(ctx context.Context) error { _, err := s.ReplaceActive(ctx, longName); return err }, config.LimitNodeNameLength},
		{"replace: too many nodes", func(ctx context.Context) error { _, err := s.ReplaceActive(ctx, tooMany); return err }, config.LimitNodes},
		{"restore: active tree", func(ctx context.Context) error { _, err := s.Restore(ctx, &Backup{Active: tooMany}); return err }, config.LimitNodes},
		{"restore: draft tree", func(ctx context.Context) error {
			_, err := s.Restore(ctx, &Backup{Active: ok, Draft: &Draft{ID: "d", Owner: "o", Tree: longName}})
			return err
		}, config.LimitNodeNameLength},
		{"restore from a file", func(ctx context.Context) error {
			_, err := s.RestoreFrom(ctx, bytes.NewReader(file(&Backup{Active: ok, Draft: &Draft{ID: "d", Owner: "o", Tree: tooMany}})))
			return err
		}, config.LimitNodes},
		{"restore from a file with findings", func(ctx context.Context) error {
			_, err := s.RestoreFrom(ctx, bytes.NewReader(file(&Backup{Active: longName, WithFindings: true, Findings: []Finding{testFinding("a", 1, 5)}})))
			return err
		}, config.LimitNodeNameLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, idx := s.Active()
			err := tc.do(ctxTimeout(t, 10e9))
			var le *config.LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit || !errors.Is(err, ErrInvalidTree) {
				t.Fatalf("err %v, want a %s limit error (and ErrInvalidTree)", err, tc.limit)
			}
			after, idx2 := s.Active()
			if idx2 != idx || !reflect.DeepEqual(childNames(after), childNames(before)) {
				t.Fatalf("a refused change changed the active tree: %v@%d -> %v@%d", childNames(before), idx, childNames(after), idx2)
			}
		})
	}
}
