package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// treeCacheFile is the file, in Config.DataDir, that holds the last tree
// the engine installed from a master.
const treeCacheFile = "tree.json"

// treeCacheFormat is the format of the tree cache file.
const treeCacheFormat = 1

// cachedTree is the tree cache file: the export file a master answered,
// its index, the SHA-256 of the export file's bytes (a file whose tree
// does not match it is corrupt) and when it was written.
type cachedTree struct {
	Format  int             `json:"format"`
	Index   uint64          `json:"index"`
	SHA256  string          `json:"sha256"`
	SavedAt time.Time       `json:"saved_at"`
	Tree    json.RawMessage `json:"tree"`
}

// treeCache keeps the last tree installed from a master in a directory, so
// that an engine started while no master answers can run it.
type treeCache struct {
	dir string
}

// path returns the cache file's path.
func (c *treeCache) path() string { return filepath.Join(c.dir, treeCacheFile) }

// save writes the tree of index atomically: a temporary file in the same
// directory, synced, renamed over the cache file, and the directory synced.
func (c *treeCache) save(index uint64, raw json.RawMessage, now time.Time) error {
	// The tree is stored compact, as it is hashed: what load reads back.
	var tree bytes.Buffer
	if err := json.Compact(&tree, raw); err != nil {
		return fmt.Errorf("tree cache: %w", err)
	}
	sum := sha256.Sum256(tree.Bytes())
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cachedTree{Format: treeCacheFormat, Index: index,
		SHA256: hex.EncodeToString(sum[:]), SavedAt: now.UTC(), Tree: tree.Bytes()}); err != nil {
		return fmt.Errorf("tree cache: encode: %w", err)
	}
	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return fmt.Errorf("tree cache: %w", err)
	}
	tmp, err := os.CreateTemp(c.dir, treeCacheFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("tree cache: %w", err)
	}
	_, werr := tmp.Write(b.Bytes())
	if werr == nil {
		werr = tmp.Sync()
	}
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("tree cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.path()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("tree cache: %w", err)
	}
	// The rename is durable once the directory is.
	d, err := os.Open(c.dir)
	if err != nil {
		return fmt.Errorf("tree cache: %w", err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("tree cache: sync %s: %w", c.dir, err)
	}
	return nil
}

// errNoCachedTree is load's error when the directory holds no cached tree.
var errNoCachedTree = errors.New("no cached tree")

// load reads the cached tree and checks it: errNoCachedTree when there is
// none, another error when the file is corrupt.
func (c *treeCache) load() (*cachedTree, error) {
	f, err := os.Open(c.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoCachedTree
	}
	if err != nil {
		return nil, fmt.Errorf("tree cache: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTreeBytes+4096))
	if err != nil {
		return nil, fmt.Errorf("tree cache: read %s: %w", c.path(), err)
	}
	var ct cachedTree
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ct); err != nil {
		return nil, fmt.Errorf("tree cache: %s is corrupt: %w", c.path(), err)
	}
	if ct.Format != treeCacheFormat {
		return nil, fmt.Errorf("tree cache: %s has format %d, not %d", c.path(), ct.Format, treeCacheFormat)
	}
	sum := sha256.Sum256(ct.Tree)
	if hex.EncodeToString(sum[:]) != ct.SHA256 || ct.Index == 0 {
		return nil, fmt.Errorf("tree cache: %s is corrupt: its tree does not match its sha256 (or it has no index)", c.path())
	}
	return &ct, nil
}
