package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/config"
)

// previousRelease is the commit of the release before this one, whose
// masters share a cluster with this build's during a rolling upgrade.
// Move it on at each release.
const previousRelease = "a2ef5f1"

// previousReleaseBinary builds cmd/squall of previousRelease, extracted
// from git into a temporary directory. Without git or that commit (a
// shallow clone, a source archive) the test is skipped with the reason;
// .ci/run says beforehand whether its clone holds the commit.
func previousReleaseBinary(t *testing.T) string {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		t.Skipf("the previous release (%s) cannot be built: %s; the test needs the repository's git history", previousRelease, why)
	}
	if _, err := exec.LookPath("git"); err != nil {
		unavailable("no git on PATH")
	}
	if out, err := exec.CommandContext(t.Context(), "git", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		unavailable(fmt.Sprintf("commit %s is not in this clone (%v: %s)", previousRelease, err, bytes.TrimSpace(out)))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	archive := exec.CommandContext(t.Context(), "git", "archive", "--format=tar", previousRelease)
	// Run in a subdirectory, git archives only that subdirectory: run it
	// at the module's root.
	archive.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	out, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	xerr := extractTar(out, src)
	if err := archive.Wait(); err != nil || xerr != nil {
		t.Fatalf("git archive %s: %v, extract: %v\n%s", previousRelease, err, xerr, stderr.String())
	}
	bin := filepath.Join(dir, "squall")
	// -trimpath: the build cache serves the next run, whatever its directory.
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, "./cmd/squall")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// extractTar writes the directories, files and symbolic links of a tar
// stream below dir.
func extractTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			if h.Typeflag == tar.TypeXGlobalHeader {
				continue
			}
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFileFrom(path, tr, os.FileMode(h.Mode)&0o755|0o600)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Symlink(h.Linkname, path)
			}
		}
		if err != nil {
			return err
		}
	}
}

func writeFileFrom(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// treeFiles returns the JSON files of dir (relative to the module root)
// by name.
func treeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no trees in %s: %v", dir, err)
	}
	trees := make(map[string][]byte, len(files))
	for _, f := range files {
		trees[strings.TrimSuffix(filepath.Base(f), ".json")] = mustRead(t, f)
	}
	return trees
}

// activeTree is a node's answer to the tree watch, its tree re-encoded by
// this build (releases may write the same tree differently).
type activeTree struct {
	index uint64
	tree  string
}

// active returns node i's active tree once its index exceeds after, or
// its current one when wait has passed (after 0: at once).
func (c *failoverCluster) active(i int, after uint64, wait string) (activeTree, error) {
	url := "http://" + c.nodes[i].http + "/squall/v1/tree/active"
	if after > 0 {
		url += fmt.Sprintf("?index=%d&wait=%s", after, wait)
	}
	code, body := apitest.Call(c.t.Context(), http.MethodGet, url, c.token, nil, "")
	if code != http.StatusOK {
		return activeTree{}, fmt.Errorf("%s: tree watch: %d %s", c.nodes[i].id, code, body)
	}
	var ans struct {
		Index uint64          `json:"index"`
		Tree  json.RawMessage `json:"tree"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return activeTree{}, fmt.Errorf("%s: tree watch: %w", c.nodes[i].id, err)
	}
	ex, err := config.DecodeExport(ans.Tree)
	if err != nil {
		return activeTree{}, fmt.Errorf("%s: active tree: %w", c.nodes[i].id, err)
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return activeTree{}, err
	}
	return activeTree{index: ans.Index, tree: string(b)}, nil
}

// sameActive checks that every node applied the leader's active tree:
// the same tree at the same index. A node that refused an entry the
// leader accepted keeps an older index, and its watch answers it after
// the wait.
func (c *failoverCluster) sameActive(leader int, what string) activeTree {
	c.t.Helper()
	want, err := c.active(leader, 0, "")
	if err != nil {
		c.t.Fatal(err)
	}
	for i := range c.nodes {
		if i == leader {
			continue
		}
		got, err := c.active(i, want.index-1, "10s")
		if err != nil {
			c.t.Fatal(err)
		}
		if got != want {
			c.t.Fatalf("after %s, %s (%s) holds the active tree of index %d, the leader %s (%s) that of index %d; trees equal: %v",
				what, c.nodes[i].id, c.release(i), got.index, c.nodes[leader].id, c.release(leader), want.index, got.tree == want.tree)
		}
	}
	return want
}

// release names the release node i runs.
func (c *failoverCluster) release(i int) string {
	if c.nodes[i].bin == "" {
		return "this build"
	}
	return "release " + previousRelease
}

// TestMasterBinary_PreviousRelease: masters of the previous release and of
// this build, in one cluster, apply the same log and decide alike. Every
// tree of the corpus (master/store/testdata/corpus) is imported into a
// draft and deployed (draft edit, deploy), then restored from a backup
// file (restore), through the leader; after each write every node holds
// the leader's active tree at the leader's index. The invalid trees of
// config/testdata/bad are refused and change nothing. It runs with either
// release in the majority.
func TestMasterBinary_PreviousRelease(t *testing.T) {
	t.Parallel()
	old := previousReleaseBinary(t)
	corpus := treeFiles(t, "master/store/testdata/corpus")
	bad := treeFiles(t, "config/testdata/bad")
	for _, tc := range []struct {
		name string
		bins [3]string
	}{
		{"two of this build, one of the previous release", [3]string{"", old, ""}},
		{"two of the previous release, one of this build", [3]string{old, "", old}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMixedCluster(t, tc.bins)
			leader := c.leader()
			t.Logf("leader %s runs %s", c.nodes[leader].id, c.release(leader))
			base := "http://" + c.nodes[leader].http
			restore := func(name string, tree []byte) {
				t.Helper()
				backup := fmt.Sprintf(`{"format":1,"index":0,"active_index":0,"active":%s,`+
					`"draft":{"id":"restored","owner":"ops","created_ms":1,"updated_ms":2,"tree":%s}}`, tree, tree)
				if code, body := apitest.Call(t.Context(), http.MethodPost, base+"/squall/v1/restore", c.token, strings.NewReader(backup), "application/json"); code != http.StatusOK {
					t.Fatalf("restore %s: %d %s", name, code, body)
				}
				c.sameActive(leader, "restoring "+name)
			}
			empty, err := json.Marshal(&config.Export{Version: config.ExportVersion, Node: config.NewRoot()})
			if err != nil {
				t.Fatal(err)
			}
			for name, tree := range corpus {
				id, code, body := apitest.ImportTree(t, base, c.token, config.RootName, tree)
				if code != http.StatusOK {
					t.Fatalf("import %s: %d %s", name, code, body)
				}
				if code, body := apitest.Call(t.Context(), http.MethodPost, base+"/api/v2_beta/config/drafts/all/"+id+"/deploy", c.token, nil, ""); code != http.StatusOK {
					t.Fatalf("deploy %s: %d %s", name, code, body)
				}
				c.sameActive(leader, "deploying "+name)
				restore(name, tree)
				ex, err := config.DecodeExport(tree)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if ex.Node.Name != config.RootName {
					// The token's authorization starts at the root "root".
					restore("an empty tree", empty)
				}
			}
			before := c.sameActive(leader, "the corpus")
			for name, tree := range bad {
				if _, code, body := apitest.ImportTree(t, base, c.token, config.RootName, tree); code < 400 || code >= 500 {
					t.Errorf("import of the invalid tree %s: %d %s", name, code, body)
				}
			}
			if after := c.sameActive(leader, "the invalid trees"); after != before {
				t.Fatalf("invalid trees changed the active tree: index %d, before %d", after.index, before.index)
			}
		})
	}
}
