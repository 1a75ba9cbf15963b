package secretfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/secretfile"
)

// TestRead reads files of every mode this process owns: only those that
// group and others cannot read pass, and a refusal names the file and the
// chmod to run.
func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o700, true}, {0o640, false}, {0o604, false}, {0o644, false}, {0o440, false}} {
		path := filepath.Join(dir, tc.mode.String())
		if err := os.WriteFile(path, []byte(" secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := secretfile.Read(path, 64)
		if tc.ok {
			if err != nil || string(b) != "secret" {
				t.Errorf("mode %04o: %q %v", tc.mode, b, err)
			}
			continue
		}
		var me *secretfile.ModeError
		if !errors.Is(err, secretfile.ErrMode) || !errors.As(err, &me) || me.Path != path ||
			!strings.HasSuffix(err.Error(), "make it readable by its owner only: chmod 600 "+path) {
			t.Errorf("mode %04o: %v, want a ModeError naming %s", tc.mode, err, path)
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 65)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secretfile.Read(big, 64); err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Errorf("file over the bound: %v", err)
	}
	if _, err := secretfile.Read(dir, 64); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}
