package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testFiles returns test files named names, each with one case.
func testFiles(names ...string) []TestFile {
	out := make([]TestFile, len(names))
	for i, n := range names {
		out[i] = TestFile{Name: n, Content: json.RawMessage(fmt.Sprintf(`{"cases":[{"name":%q,"event":{"type":"t"},"no_match":["root/rs/r"]}]}`, n))}
	}
	return out
}

func sameTests(t *testing.T, what string, got, want []TestFile) {
	t.Helper()
	g, _ := TestsHash(got)
	w, _ := TestsHash(want)
	if g != w || len(got) != len(want) {
		t.Fatalf("%s: tests %s, want %s", what, testNames(got), testNames(want))
	}
}

func testNames(files []TestFile) string {
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// TestCheckTestFiles: the bounds and forms a draft's tests must have.
func TestCheckTestFiles(t *testing.T) {
	big := TestFile{Name: "big.json", Content: json.RawMessage(`{"x":"` + strings.Repeat("a", MaxTestsBytes) + `"}`)}
	many := make([]TestFile, MaxTestFiles+1)
	for i := range many {
		many[i] = testFiles(fmt.Sprintf("f%03d.json", i))[0]
	}
	for _, tc := range []struct {
		name  string
		files []TestFile
		want  string
	}{
		{"none", nil, ""},
		{"two", testFiles("a.json", "b.json"), ""},
		{"unsorted", testFiles("b.json", "a.json"), "sorted by name"},
		{"duplicate", testFiles("a.json", "a.json"), "sorted by name"},
		{"empty name", testFiles(""), "1 to 128 bytes"},
		{"dot name", testFiles(".a"), "starts with a dot"},
		{"slash", testFiles("a/b.json"), "letters, digits"},
		{"not an object", []TestFile{{Name: "a.json", Content: json.RawMessage(`[1]`)}}, "not a JSON object"},
		{"too large", []TestFile{big}, "at most 1048576"},
		{"too many", many, "at most 100"},
	} {
		err := CheckTestFiles(tc.files)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrInvalidCommand) || !strings.Contains(fmt.Sprint(err), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestStore_DraftTests: tests set on the draft are replicated with it; a
// deploy that ran none, or that tested another draft than the current
// one, is refused and changes nothing; a tested deploy records the tests
// with the active tree and the version; a new draft starts with them; a
// rollback brings a version's tests back; the audit log records the
// edits; everything survives a reopen.
func TestStore_DraftTests(t *testing.T) {
	s := openReady(t, "node0")
	ctx := ctxTimeout(t, 20*time.Second)

	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetDraftTests(ctx, nil, id, "alice", testFiles("b.json", "a.json")); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("unsorted tests: %v", err)
	}
	if err := s.SetDraftTests(ctx, nil, id, "bob", testFiles("a.json")); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("tests by another user: %v", err)
	}
	v1tests := testFiles("a.json", "b.json")
	if err := s.SetDraftTests(ctx, nil, id, "alice", v1tests); err != nil {
		t.Fatal(err)
	}
	if err := s.EditDraft(ctx, id, "alice", treeWith("one")); err != nil {
		t.Fatal(err)
	}
	d, err := s.Draft()
	if err != nil {
		t.Fatal(err)
	}
	sameTests(t, "draft", d.Tests, v1tests)
	tested, err := TestedOf(d)
	if err != nil || tested.Tests == "" || tested.Tree == "" {
		t.Fatalf("TestedOf: %+v %v", tested, err)
	}

	// Refused deploys change nothing.
	_, before := s.Active()
	stale := tested
	stale.Tree = strings.Repeat("0", 64)
	for name, deploy := range map[string]func() error{
		"without tests": func() error { _, err := s.DeployVersion(ctx, nil, id, "alice", nil, ""); return err },
		"another tree":  func() error { _, err := s.DeployTested(ctx, nil, id, "alice", nil, "", stale); return err },
		"no tests named": func() error {
			_, err := s.DeployTested(ctx, nil, id, "alice", nil, "", Tested{})
			return err
		},
	} {
		err := deploy()
		if !errors.Is(err, ErrTestsNotRun) && !errors.Is(err, ErrDraftChanged) {
			t.Fatalf("deploy %s: %v, want a refusal", name, err)
		}
		if _, idx := s.Active(); idx != before || len(s.Versions()) != 0 || len(s.ActiveTests()) != 0 {
			t.Fatalf("refused deploy %s changed the state", name)
		}
	}

	// The draft edited after the tests ran: refused.
	if err := s.EditDraft(ctx, id, "alice", treeWith("one", "two")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeployTested(ctx, nil, id, "alice", nil, "", tested); !errors.Is(err, ErrDraftChanged) {
		t.Fatalf("deploy of a draft edited after its tests ran: %v", err)
	}
	d, _ = s.Draft()
	if tested, err = TestedOf(d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeployTested(ctx, nil, id, "alice", nil, "v1", tested); err != nil {
		t.Fatal(err)
	}
	vs := s.Versions()
	if len(vs) != 1 || vs[0].TestsHash != tested.Tests {
		t.Fatalf("versions %+v, want one with tests %s", vs, tested.Tests)
	}
	sameTests(t, "active", s.ActiveTests(), v1tests)
	if got, err := s.VersionTests(1); err != nil {
		t.Fatal(err)
	} else {
		sameTests(t, "version 1", got, v1tests)
	}
	if err := s.DeleteDraft(ctx, nil, id, "alice"); err != nil {
		t.Fatal(err)
	}

	// A new draft starts with the active tree's tests; version 2 has none.
	id, err = s.CreateDraft(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ = s.Draft(); len(d.Tests) != 2 {
		t.Fatalf("new draft tests %s, want the active tree's", testNames(d.Tests))
	}
	if err := s.SetDraftTests(ctx, nil, id, "bob", nil); err != nil {
		t.Fatal(err)
	}
	if d, _ = s.Draft(); len(d.Tests) != 0 {
		t.Fatalf("draft tests %s after clearing them", testNames(d.Tests))
	}
	if _, err := s.DeployVersion(ctx, nil, id, "bob", nil, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDraft(ctx, nil, id, "bob"); err != nil {
		t.Fatal(err)
	}
	if vs = s.Versions(); vs[0].TestsHash != "" || len(s.ActiveTests()) != 0 {
		t.Fatalf("version 2 %+v, active tests %s: want none", vs[0], testNames(s.ActiveTests()))
	}
	if _, err := s.RollbackTo(ctx, nil, Rollback{Version: 1, User: "carol"}); err != nil {
		t.Fatal(err)
	}
	if vs = s.Versions(); vs[0].RollbackOf != 1 || vs[0].TestsHash != tested.Tests {
		t.Fatalf("rollback version %+v, want version 1's tests", vs[0])
	}
	sameTests(t, "active after the rollback", s.ActiveTests(), v1tests)

	recs, _, err := s.Audit(AuditQuery{Action: "draft.tests", Limit: 10})
	if err != nil || len(recs) != 3 {
		t.Fatalf("draft.tests records %+v %v, want 3 (one refused, two applied)", recs, err)
	}
	if r := recs[2]; r.Result != "refused" || r.Code != "NOT_OWNER" {
		t.Fatalf("oldest draft.tests record %+v", r)
	}
	if r := recs[1]; r.Detail != "2 test files: a.json, b.json" || r.User != "alice" {
		t.Fatalf("draft.tests record %+v", r)
	}

	// A reopened store has the same tests.
	id, err = s.CreateDraft(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	waitReady(t, s)
	if d, err = s.Draft(); err != nil || d.ID != id {
		t.Fatalf("draft after reopen: %+v %v", d, err)
	}
	sameTests(t, "draft after reopen", d.Tests, v1tests)
	sameTests(t, "active after reopen", s.ActiveTests(), v1tests)
	if got, err := s.VersionTests(3); err != nil {
		t.Fatal(err)
	} else {
		sameTests(t, "version 3 after reopen", got, v1tests)
	}
}

// TestStore_DraftTestsBelowLevel: a cluster with a member of level 4
// refuses tests (ErrLevel) and deploys as before.
func TestStore_DraftTestsBelowLevel(t *testing.T) {
	nodes := newCluster(t, 3, nil, func(i int, s *Store) {
		if i == 2 {
			s.level = LevelAudit
		}
	})
	waitFor(t, 10*time.Second, func() bool { return leaderOf(t, nodes).ClusterFeatureLevel() == LevelAudit }, "the cluster at level 4")
	l := leaderOf(t, nodes)
	ctx := ctxTimeout(t, 10*time.Second)
	id, err := l.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetDraftTests(ctx, nil, id, "alice", testFiles("a.json")); !errors.Is(err, ErrLevel) || !strings.Contains(err.Error(), "feature level 5") {
		t.Fatalf("tests at level 4: %v", err)
	}
	if _, err := l.DeployTested(ctx, nil, id, "alice", nil, "", Tested{}); err != nil {
		t.Fatalf("deploy at level 4: %v", err)
	}
	waitConverged(t, nodes)
	if vs := nodes[2].Versions(); len(vs) != 1 {
		t.Fatalf("the level 4 node has versions %+v", vs)
	}
}

// TestFSM_DraftTestFormsBelowLevel: a state machine of level 4 panics on
// the entries of level 5, naming the level.
func TestFSM_DraftTestFormsBelowLevel(t *testing.T) {
	f := newTestFSM(t)
	f.level = LevelAudit
	fsmApply(t, f, 1, CreateDraft{ID: "d1", Owner: "alice", Now: time.UnixMilli(1)})
	for i, cmd := range []Command{
		SetDraftTests{ID: "d1", User: "alice", Tests: testFiles("a.json"), Now: time.UnixMilli(2)},
		deployTested{deployVersion{ID: "d1", User: "alice", Now: time.UnixMilli(2), Keep: 5}, Tested{}},
		wrapped(session("k", ""), time.UnixMilli(2), SetDraftTests{ID: "d1", User: "alice", Now: time.UnixMilli(2)}),
		RestoreState{Active: treeWith(), ActiveTests: testFiles("a.json")},
		RestoreVersions{Versions: []VersionTree{{Version: Version{Number: 1}, Tree: mustEncode(t), Tests: testFiles("a.json")}}},
	} {
		mustPanicForLevel(t, LevelDraftTests, fmt.Sprintf("%T at level 4", cmd), func() { fsmApply(t, f, uint64(2+i), cmd) })
	}
}

func mustEncode(t *testing.T) json.RawMessage {
	raw, err := encodeTree(treeWith())
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestBackup_DraftTests: a backup holds the tests of the draft, of the
// active tree and of each version; a restore into another cluster brings
// them back; a file of an earlier format with tests is refused.
func TestBackup_DraftTests(t *testing.T) {
	src := openReady(t, "src")
	ctx := ctxTimeout(t, 20*time.Second)
	id, err := src.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	v1 := testFiles("v1.json")
	if err := src.SetDraftTests(ctx, nil, id, "alice", v1); err != nil {
		t.Fatal(err)
	}
	d, _ := src.Draft()
	tested, _ := TestedOf(d)
	if _, err := src.DeployTested(ctx, nil, id, "alice", nil, "", tested); err != nil {
		t.Fatal(err)
	}
	draftTests := testFiles("a.json", "v1.json")
	if err := src.SetDraftTests(ctx, nil, id, "alice", draftTests); err != nil {
		t.Fatal(err)
	}
	b, file := backupOf(t, src)
	if !b.WithTests || len(b.Versions) != 1 || !reflect.DeepEqual(testNames(b.Versions[0].Tests), "[v1.json]") {
		t.Fatalf("backup: with tests %t, versions %+v", b.WithTests, b.Versions)
	}
	sum, err := CheckBackup(bytes.NewReader(file))
	if err != nil || sum.Format != BackupFormat || sum.TestFiles != 3 {
		t.Fatalf("summary %+v %v", sum, err)
	}

	dst := openReady(t, "dst")
	r, err := dst.RestoreFrom(ctx, bytes.NewReader(file))
	if err != nil || r.TestsSkipped {
		t.Fatalf("restore: %+v %v", r, err)
	}
	if d, err = dst.Draft(); err != nil {
		t.Fatal(err)
	}
	sameTests(t, "restored draft", d.Tests, draftTests)
	sameTests(t, "restored active", dst.ActiveTests(), v1)
	if got, err := dst.VersionTests(1); err != nil {
		t.Fatal(err)
	} else {
		sameTests(t, "restored version 1", got, v1)
	}

	// Tests in a file of format 4 are refused.
	old := bytes.Replace(dropKey(t, file, "ids"), []byte(backupFormatKey), []byte(`"format":4`), 1)
	if _, err := DecodeBackup(bytes.NewReader(old)); !errors.Is(err, ErrInvalidBackup) || !strings.Contains(err.Error(), "format 5") {
		t.Fatalf("format 4 with tests: %v", err)
	}
}
