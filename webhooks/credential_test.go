package webhooks

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/filetest"
)

// TestWebhook_MatchToken: the index of the token entry that matched, and
// entries past their not_after refused.
func TestWebhook_MatchToken(t *testing.T) {
	t.Parallel()
	w := mustParse(t, `{"id": "h", "collector_config": {"event_type": "e", "payload": {}},
		"tokens": [{"value": "old-long-enough-token", "not_after": "2026-01-01T00:00:00Z"}, "new-long-enough-token", {"value": "new-long-enough-token"}]}`)
	if w.Tokens() != 3 {
		t.Fatalf("Tokens = %d", w.Tokens())
	}
	before := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
	after := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	for _, tc := range []struct {
		tok   string
		now   time.Time
		index int
		ok    bool
	}{
		{"old-long-enough-token", before, 0, true},
		{"old-long-enough-token", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0, true}, // not_after itself
		{"old-long-enough-token", after, -1, false},
		{"new-long-enough-token", after, 1, true}, // the first of two equal entries
		{"", after, -1, false},
		{"new-long-enough-toke", after, -1, false},
	} {
		if index, ok := w.MatchToken(tc.tok, tc.now); index != tc.index || ok != tc.ok {
			t.Errorf("MatchToken(%q, %s) = %d %v, want %d %v", tc.tok, tc.now, index, ok, tc.index, tc.ok)
		}
	}
}

// TestParse_CredentialSources reads tokens and secrets from values, files
// and environment variables.
func TestParse_CredentialSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(abs, []byte("  It's a Secret to Everybody\r\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOOK_TOKEN": "env-token", "HOOK_SECRET": "wrong secret", "BLANK": " "}
	src := Source{Dir: dir, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	doc := `{"id": "h", "collector_config": {"event_type": "e", "payload": {}},
		"tokens": [{"file": "token"}, {"env": "HOOK_TOKEN", "not_after": "2999-01-01T00:00:00+02:00"}, "plain"],
		"signature": {"scheme": "github", "secrets": [{"env": "HOOK_SECRET"}, {"file": "` + abs + `"}]}}`
	w, err := ParseWith(strings.NewReader(doc), src)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, tok := range []string{"file-token", "env-token", "plain"} {
		if index, ok := w.MatchToken(tok, now); !ok || index != i {
			t.Errorf("MatchToken(%q) = %d %v, want %d", tok, index, ok, i)
		}
	}
	// The file's secret (entry 1) verifies GitHub's documented example.
	h := http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}
	if index, err := w.Signature.Verify(h, []byte("Hello, World!"), now); err != nil || index != 1 {
		t.Errorf("Verify = %d %v, want 1", index, err)
	}

	for _, tc := range []struct {
		name, tokens, want string
		mode               os.FileMode
	}{
		{"group-readable file", `[{"file": "loose"}]`, `tokens[0].file "loose": readable by group or others (mode 0640): make it readable by its owner only: chmod 600 `, 0o640},
		{"world-readable file", `[{"file": "loose"}]`, "readable by group or others (mode 0604)", 0o604},
		{"blank env", `[{"env": "BLANK"}]`, `tokens[0].env "BLANK": environment variable unset or empty`, 0},
		{"directory", `[{"file": "."}]`, `tokens[0].file ".": not a regular file`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if tc.mode != 0 {
				p := filetest.Write(t, d, "loose", "LOOSE-TOKEN")
				if err := os.Chmod(p, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			src := Source{Dir: d, LookupEnv: src.LookupEnv}
			_, err := ParseWith(strings.NewReader(`{"id": "h", "tokens": `+tc.tokens+`, "collector_config": {"event_type": "e", "payload": {}}}`), src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseWith = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "LOOSE-TOKEN") {
				t.Errorf("error shows the token: %v", err)
			}
			if tc.mode != 0 && !errors.Is(err, ErrSecretFileMode) {
				t.Errorf("error %v is not ErrSecretFileMode", err)
			}
		})
	}

	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxSecretFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseWith(strings.NewReader(`{"id": "h", "tokens": [{"file": "big"}], "collector_config": {"event_type": "e", "payload": {}}}`), src); err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") {
		t.Errorf("big file: %v", err)
	}
}

// TestLoadDir_SecretFiles: a relative secret file is read from the webhook
// directory; a webhook whose secret file others may read is skipped and
// reported, and the other webhooks load.
func TestLoadDir_SecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hook := func(id, file string) string {
		return `{"id": "` + id + `", "token": "a-long-test-token", "signature": {"scheme": "slack", "secrets": [{"file": "` + file + `"}]},
			"collector_config": {"event_type": "e", "payload": {}}}`
	}
	writeFile(t, filepath.Join(dir, "a.json"), hook("a", "a.secret"))
	writeFile(t, filepath.Join(dir, "b.json"), hook("b", "b.secret"))
	for name, mode := range map[string]os.FileMode{"a.secret": 0o600, "b.secret": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("s"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	set, problems, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, problems, map[string]string{"b.json": `b.json: signature.secrets[0].file "b.secret": readable by group or others (mode 0644)`})
	if set["a"] == nil || set["b"] != nil {
		t.Errorf("loaded %v", set)
	}
}

// TestParse_ShortToken: a token shorter than MinTokenLen characters makes
// the file invalid, unless a signature protects the webhook; the error
// never contains the token.
func TestParse_ShortToken(t *testing.T) {
	t.Parallel()
	const collector = `"collector_config": {"event_type": "e", "payload": {}}`
	for _, tc := range []struct{ name, doc, field string }{
		{"one letter", `{"id": "h", "token": "a", ` + collector + `}`, "token"},
		{"15 characters", `{"id": "h", "token": "abcdefghijklmno", ` + collector + `}`, "token"},
		{"15 characters, some multibyte", `{"id": "h", "token": "ééééééééééééééé", ` + collector + `}`, "token"},
		{"one entry of tokens", `{"id": "h", "tokens": ["a-long-test-token", {"value": "short1"}], ` + collector + `}`, "tokens[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(err.Error(), "shorter than 16 characters") {
				t.Fatalf("err %v, want a %s shorter than 16 characters", err, tc.field)
			}
			if strings.Contains(err.Error(), "short1") || strings.Contains(err.Error(), `"a"`) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	for _, doc := range []string{
		`{"id": "h", "token": "abcdefghijklmnop", ` + collector + `}`,
		`{"id": "h", "token": "a", "signature": {"scheme": "github", "secret": "s"}, ` + collector + `}`,
	} {
		w := mustParse(t, doc)
		if err := w.Validate(); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
	// Validate holds the rule for a webhook changed after Parse.
	w := mustParse(t, `{"id": "h", "token": "a", "signature": {"scheme": "github", "secret": "s"}, `+collector+`}`)
	w.Signature = nil
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "shorter than 16") {
		t.Errorf("Validate without the signature: %v", err)
	}
}
