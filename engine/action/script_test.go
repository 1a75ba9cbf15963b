package action

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/logtest"
)

// argvScript writes its arguments after the first, NUL-terminated, to the
// file named by its first argument.
const argvScript = `out=$1
shift
for a in "$@"; do printf '%s\0' "$a"; done > "$out"
`

// newTestScript returns a script executor on a fresh allowed directory.
func newTestScript(t *testing.T, modify func(c *ScriptConfig)) (*scriptExecutor, string, *logtest.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := Default().Script
	cfg.AllowedDir = dir
	cfg.Timeout = Duration(10 * time.Second)
	if modify != nil {
		modify(&cfg)
	}
	log, out := newTestLogger()
	return newScriptExecutor(cfg, log), dir, out
}

func readArgv(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

func TestScript_Execute_argv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string // after the program and the output file
		args   string // JSON; empty: no args field
		want   []string
	}{
		{name: "no arguments", want: []string{}},
		{name: "leading arguments from script", script: "-a  b\tc", want: []string{"-a", "b", "c"}},
		{name: "string is one argument", args: `"two words"`, want: []string{"two words"}},
		{name: "number and bool", args: `[42, 1.50, true, false]`, want: []string{"42", "1.50", "true", "false"}},
		{name: "null ignored", args: `null`, want: []string{}},
		{name: "nested arrays flatten", args: `["a", ["b", ["c"]], null, "d"]`, want: []string{"a", "b", "c", "d"}},
		{
			name: "object keys sorted",
			args: `{"zeta": "z", "alpha": [1, 2], "mid": {"x": "y"}, "flag": null}`,
			want: []string{"--alpha", "1", "2", "--flag", "--mid", "--x", "y", "--zeta", "z"},
		},
		{name: "leading then args", script: "first", args: `["second"]`, want: []string{"first", "second"}},
		{
			name: "shell syntax stays literal",
			args: `["$(touch pwned)", "; touch pwned", "| cat", "*", "$HOME", "a'b\"c", "` + "`touch pwned`" + `", "x\ny"]`,
			want: []string{"$(touch pwned)", "; touch pwned", "| cat", "*", "$HOME", `a'b"c`, "`touch pwned`", "x\ny"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, dir, _ := newTestScript(t, nil)
			writeScript(t, dir, "argv.sh", argvScript)
			out := filepath.Join(t.TempDir(), "argv")
			p := map[string]any{"script": "argv.sh " + out + " " + tt.script}
			if tt.args != "" {
				p["args"] = decodeJSON(t, tt.args)
			}
			if err := s.Execute(t.Context(), tree.Action{ID: IDScript, Payload: p}); err != nil {
				t.Fatal(err)
			}
			if got := readArgv(t, out); !slices.Equal(got, tt.want) {
				t.Fatalf("argv %q, want %q", got, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("a shell interpreted an argument")
			}
		})
	}
}

func TestScript_Execute_refused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns the script field
		wantErr error
	}{
		{
			name:    "absolute path outside",
			setup:   func(t *testing.T, dir string) string { return "/bin/sh -c id" },
			wantErr: ErrPathEscape,
		},
		{
			name: "relative path climbing out",
			setup: func(t *testing.T, dir string) string {
				outside := t.TempDir()
				writeScript(t, outside, "evil.sh", "exit 0\n")
				rel, _ := filepath.Rel(dir, filepath.Join(outside, "evil.sh"))
				return rel
			},
			wantErr: ErrPathEscape,
		},
		{
			name: "symbolic link to outside",
			setup: func(t *testing.T, dir string) string {
				mustSymlink(t, "/bin/true", filepath.Join(dir, "true"))
				return "true"
			},
			wantErr: ErrPathEscape,
		},
		{
			name:    "no PATH lookup",
			setup:   func(t *testing.T, dir string) string { return "sh -c id" },
			wantErr: fs.ErrNotExist,
		},
		{
			name:    "missing program",
			setup:   func(t *testing.T, dir string) string { return "nope.sh" },
			wantErr: fs.ErrNotExist,
		},
		{
			name: "not executable",
			setup: func(t *testing.T, dir string) string {
				if err := os.WriteFile(filepath.Join(dir, "plain.sh"), []byte("exit 0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return "plain.sh"
			},
		},
		{
			name: "a directory",
			setup: func(t *testing.T, dir string) string {
				mustMkdir(t, filepath.Join(dir, "sub"))
				return "sub"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, dir, _ := newTestScript(t, nil)
			err := s.Execute(t.Context(), tree.Action{ID: IDScript, Payload: map[string]any{"script": tt.setup(t, dir)}})
			if err == nil || Retriable(err) {
				t.Fatalf("Execute: %v, want a permanent error", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Execute: %v, want %v", err, tt.wantErr)
			}
		})
	}

	t.Run("link inside the directory runs", func(t *testing.T) {
		t.Parallel()
		s, dir, _ := newTestScript(t, nil)
		writeScript(t, dir, "real.sh", "exit 0\n")
		mustSymlink(t, "real.sh", filepath.Join(dir, "alias"))
		if err := s.Execute(t.Context(), tree.Action{Payload: map[string]any{"script": filepath.Join(dir, "alias")}}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestScript_Execute_exitStatus(t *testing.T) {
	t.Parallel()
	s, dir, logs := newTestScript(t, func(c *ScriptConfig) { c.MaxOutput = 16 })
	writeScript(t, dir, "fail.sh", "echo 'some output that is long'; echo oops >&2; exit 3\n")
	err := s.Execute(t.Context(), tree.Action{ID: "script", Payload: map[string]any{"script": "fail.sh"}})
	if !Retriable(err) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Execute: %v, want a retriable exit status 3", err)
	}
	var rec struct {
		Msg      string `json:"msg"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if err := json.Unmarshal(bytes.TrimSpace([]byte(logs.String())), &rec); err != nil {
		t.Fatalf("log %q: %v", logs, err)
	}
	if rec.Msg != "script finished" || rec.ExitCode != 3 || rec.Stdout != "some output that… (9 more bytes)" || rec.Stderr != "oops\n" {
		t.Fatalf("log record %+v", rec)
	}
}

func TestScript_Execute_timeoutKills(t *testing.T) {
	t.Parallel()
	s, dir, _ := newTestScript(t, func(c *ScriptConfig) { c.Timeout = Duration(200 * time.Millisecond) })
	// The shell forks sleep, which holds the output pipe: only killing the
	// process group lets the run end.
	writeScript(t, dir, "slow.sh", "sleep 60\necho done\n")
	start := time.Now()
	err := s.Execute(t.Context(), tree.Action{Payload: map[string]any{"script": "slow.sh"}})
	if !Retriable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Execute: %v, want a retriable timeout", err)
	}
	if elapsed := time.Since(start); elapsed > scriptWaitDelay {
		t.Fatalf("the run took %v: the process group was not killed", elapsed)
	}
}

func TestScript_Execute_environment(t *testing.T) {
	t.Setenv("SQUALL_TEST_SECRET", "hunter2")
	s, dir, _ := newTestScript(t, func(c *ScriptConfig) { c.Env = map[string]string{"ONLY": "this"} })
	writeScript(t, dir, "env.sh", `env > "$1"; pwd >> "$1"`+"\n")
	out := filepath.Join(t.TempDir(), "env")
	if err := s.Execute(t.Context(), tree.Action{Payload: map[string]any{"script": "env.sh", "args": out}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "ONLY=this") || !strings.Contains(got, dir) {
		t.Fatalf("environment and directory of the script:\n%s", got)
	}
}

func TestAppendArgs_invalid(t *testing.T) {
	t.Parallel()
	if _, err := appendArgs(nil, []any{"a", struct{}{}}); !errors.Is(err, ErrInvalidPayload) {
		t.Fatalf("appendArgs: %v, want ErrInvalidPayload", err)
	}
}

func TestScript_Execute_textFileBusy(t *testing.T) {
	t.Parallel()
	s, dir, _ := newTestScript(t, nil)
	p := writeScript(t, dir, "busy.sh", "exit 0\n")
	// A writer holds the program open: exec fails with ETXTBSY every time.
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = s.Execute(t.Context(), tree.Action{Payload: map[string]any{"script": "busy.sh"}})
	if !errors.Is(err, syscall.ETXTBSY) || !Retriable(err) {
		t.Fatalf("Execute: %v, want a retriable ETXTBSY", err)
	}
}
