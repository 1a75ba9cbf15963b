package webhooks

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func webhookJSON(id string) string {
	return `{"id": "` + id + `", "token": "a-long-test-token", "collector_config": {"event_type": "e", "payload": {"all": "${@}"}}}`
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// checkProblems checks that the problems concern exactly the files of want,
// in name order, and that each message contains its file's expected text.
func checkProblems(t *testing.T, problems []FileError, want map[string]string) {
	t.Helper()
	var names []string
	for _, p := range problems {
		names = append(names, p.Name)
		if sub, ok := want[p.Name]; !ok || !strings.Contains(p.Error(), sub) {
			t.Errorf("problem %q, want one containing %q", p.Error(), sub)
		}
	}
	wantNames := slices.Sorted(maps.Keys(want))
	if !slices.Equal(names, wantNames) {
		t.Errorf("problems in %v, want %v", names, wantNames)
	}
}

func TestLoadDir_Tornado(t *testing.T) {
	t.Parallel()
	set, problems, err := LoadDir(filepath.Join("testdata", "webhooks"))
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, problems, nil)
	ids := slices.Sorted(maps.Keys(set))
	if want := []string{"bitbucket_test_repository", "github_test_repository"}; !slices.Equal(ids, want) {
		t.Fatalf("ids = %v, want %v", ids, want)
	}
	w := set["bitbucket_test_repository"]
	if !w.CheckToken("abcdefghilmnopqrs") || w.CheckToken("1234567890123456") {
		t.Error("bitbucket token check")
	}
	ev, err := w.Collector().Collect([]byte(`{"push": {"changes": []}}`), testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "webhook_bitbucket" || ev.Payload["source"] != "bitbucket" || ev.Payload["data"] == nil {
		t.Errorf("event = %+v", ev)
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.json"), webhookJSON("outside"))

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), webhookJSON("dup"))
	writeFile(t, filepath.Join(dir, "b.json"), webhookJSON("dup"))             // duplicate id
	writeFile(t, filepath.Join(dir, "c.json"), `{"id": "broken", "token": `)   // broken
	writeFile(t, filepath.Join(dir, "d.json"), webhookJSON("good"))            // fine, after the bad ones
	writeFile(t, filepath.Join(dir, "e.json"), webhookJSON("dup"))             // second duplicate
	writeFile(t, filepath.Join(dir, ".hidden.json"), webhookJSON("hidden"))    // hidden: ignored
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a webhook")             // not .json: ignored
	writeFile(t, filepath.Join(dir, "f.json~"), webhookJSON("backup"))         // editor backup: ignored
	writeFile(t, filepath.Join(dir, "sub.json", "x.json"), webhookJSON("sub")) // directory: ignored
	writeFile(t, filepath.Join(dir, "inner", "real.json"), webhookJSON("linked"))
	symlink(t, filepath.Join("inner", "real.json"), filepath.Join(dir, "g.json"))         // link inside: followed
	symlink(t, filepath.Join(outside, "secret.json"), filepath.Join(dir, "h.json"))       // absolute link outside: refused
	symlink(t, filepath.Join("..", filepath.Base(outside)), filepath.Join(dir, "i.json")) // relative link outside: refused
	symlink(t, "missing.json", filepath.Join(dir, "j.json"))                              // dangling link
	writeFile(t, filepath.Join(dir, "k.json"), `{"id": "bad id", "token": "a-long-test-token", "collector_config": {}}`)

	set, problems, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(maps.Keys(set))
	if want := []string{"dup", "good", "linked"}; !slices.Equal(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	checkProblems(t, problems, map[string]string{
		"b.json": `b.json: id "dup": duplicate id, already defined in a.json`,
		"c.json": "c.json: (file): invalid JSON",
		"e.json": "already defined in a.json",
		"h.json": "h.json: ",
		"i.json": "i.json: ",
		"j.json": "j.json: ",
		"k.json": `id "bad id"`,
	})
	for _, p := range problems {
		if p.Name == "h.json" || p.Name == "i.json" {
			if !strings.Contains(p.Error(), "escapes") {
				t.Errorf("link out of the directory: %v", p)
			}
		}
		if p.Name == "j.json" && !errors.Is(p, fs.ErrNotExist) {
			t.Errorf("dangling link: %v is not fs.ErrNotExist", p)
		}
		var ve *ValidationError
		if p.Name == "b.json" && (!errors.As(p, &ve) || ve.Field != "id") {
			t.Errorf("duplicate: %v is not a ValidationError of id", p)
		}
	}
}

// TestLoadDir_ConfigMap uses the layout of a Kubernetes ConfigMap volume:
// visible names link through the hidden "..data" link to a timestamped
// directory.
func TestLoadDir_ConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const version = "..2026_01_02_03_04_05.123456789"
	writeFile(t, filepath.Join(dir, version, "github.json"), webhookJSON("github"))
	writeFile(t, filepath.Join(dir, version, "gitlab.json"), webhookJSON("gitlab"))
	symlink(t, version, filepath.Join(dir, "..data"))
	symlink(t, filepath.Join("..data", "github.json"), filepath.Join(dir, "github.json"))
	symlink(t, filepath.Join("..data", "gitlab.json"), filepath.Join(dir, "gitlab.json"))

	set, problems, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, problems, nil)
	if ids := slices.Sorted(maps.Keys(set)); !slices.Equal(ids, []string{"github", "gitlab"}) {
		t.Errorf("ids = %v", ids)
	}
}

func TestLoadDir_SymlinkedDir(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	writeFile(t, filepath.Join(real, "a.json"), webhookJSON("a"))
	link := filepath.Join(t.TempDir(), "webhooks.d")
	symlink(t, real, link)

	set, problems, err := LoadDir(link)
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, problems, nil)
	if len(set) != 1 || set["a"] == nil {
		t.Errorf("set = %v", set)
	}
}

func TestLoadDir_Errors(t *testing.T) {
	t.Parallel()
	set, problems, err := LoadDir(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) || set != nil || problems != nil {
		t.Errorf("missing dir: %v, %v, %v", set, problems, err)
	}

	file := filepath.Join(t.TempDir(), "file.json")
	writeFile(t, file, webhookJSON("a"))
	if _, _, err := LoadDir(file); err == nil {
		t.Error("LoadDir of a file succeeded")
	}

	// An empty directory is an empty set, not an error.
	set, problems, err = LoadDir(t.TempDir())
	if err != nil || len(set) != 0 || len(problems) != 0 {
		t.Errorf("empty dir: %v, %v, %v", set, problems, err)
	}
}
