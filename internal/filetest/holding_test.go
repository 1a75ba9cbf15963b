package filetest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHolding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	Write(t, dir, "b.db", "xx secret xx")
	Write(t, dir, "a.log", "secret")
	Write(t, dir, "clean", "nothing here")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	Write(t, filepath.Join(dir, "sub"), "c.bin", "a secret below")
	if got, want := Holding(t, dir, "secret"), []string{"a.log", "b.db", "c.bin"}; !slices.Equal(got, want) {
		t.Errorf("Holding: %v, want %v", got, want)
	}
	if got := Holding(t, dir, "absent"); len(got) != 0 {
		t.Errorf("Holding of a text no file holds: %v", got)
	}
}
