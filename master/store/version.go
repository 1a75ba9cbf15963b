package store

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
)

// Versions of the active tree (docs/decisions.md decision 54): from
// feature level LevelVersions on, every deploy and every rollback records
// a Version, replicated with the tree. The versions' metadata is kept in
// memory (the state); their trees stay in the state file, content
// addressed, and are read on demand.

// LevelVersions is the feature level from which deploys are written as
// DeployVersion entries (which record a version), and from which the
// Rollback and RestoreVersions entries exist. Below it a deploy is written
// as a master before versions writes it, records nothing, and a rollback
// is refused with ErrLevel.
const LevelVersions = 3

// DefaultKeepVersions is how many versions the state keeps by default.
const DefaultKeepVersions = 200

// MaxKeepVersions bounds Config.KeepVersions.
const MaxKeepVersions = 100_000

// MaxVersionMessage bounds a version's message, in bytes.
const MaxVersionMessage = 1024

// The version command types.
const (
	typeDeployVersion   cmdType = 23
	typeRollback        cmdType = 24
	typeRestoreVersions cmdType = 25
)

var (
	// ErrNoVersion means the state holds no version with the given number
	// (never recorded, or pruned).
	ErrNoVersion = errors.New("no such version")
	// ErrDraftExists means a rollback was refused because a draft exists
	// and it was not forced. The error is a *DraftExistsError.
	ErrDraftExists = errors.New("a draft exists")
	// ErrLevel means the command needs a feature level the cluster does
	// not have yet: a member runs an older binary.
	ErrLevel = errors.New("the cluster's feature level is too low")
)

// DraftExistsError is the result of a rollback refused because of a
// draft. It matches ErrDraftExists.
type DraftExistsError struct {
	DraftID string
	Owner   string
}

// Error names the draft and its owner.
func (e *DraftExistsError) Error() string {
	return fmt.Sprintf("%s: draft %s of %s (roll back with force to keep it and deploy the version anyway)", ErrDraftExists, e.DraftID, e.Owner)
}

// Is reports whether target is ErrDraftExists.
func (e *DraftExistsError) Is(target error) bool { return target == ErrDraftExists }

// Version is one recorded version of the active tree: a deploy or a
// rollback. Its time is the leader's, stamped into the entry.
type Version struct {
	// Number grows by one with each version, never reused.
	Number uint64 `json:"number"`
	// Index is the raft log index of the entry that made it.
	Index  uint64 `json:"index"`
	Author string `json:"author"`
	// TimeMS is Unix milliseconds, chosen by the leader that wrote the entry.
	TimeMS  int64  `json:"time_ms"`
	Message string `json:"message,omitempty"`
	// Hash is the hex SHA-256 of the tree's export file as stored (the
	// compact form of encodeTree).
	Hash  string `json:"hash"`
	Nodes int    `json:"nodes"`
	Rules int    `json:"rules"`
	// RollbackOf is the number of the version a rollback deployed again
	// (0 for a deploy).
	RollbackOf uint64 `json:"rollback_of,omitempty"`
	// Scope is the node a scoped deploy or rollback was limited to (none:
	// the whole tree).
	Scope []string `json:"scope,omitempty"`
	// TestsHash is the TestsHash of the tests the version was deployed
	// with (none: no tests; see drafttests.go).
	TestsHash string `json:"tests_hash,omitempty"`
}

// VersionTree is a version and its tree's export file, as a backup holds
// it, with its tests (backup format 5).
type VersionTree struct {
	Version
	Tree  json.RawMessage `json:"tree"`
	Tests []TestFile      `json:"tests,omitempty"`
}

// Rollback deploys the tree of version Version as a new version (one
// entry). A scoped rollback (Scope below the root) replaces only the
// subtree at Scope with the version's, and is refused with an
// *OutOfScopeError when that node's isolating fields differ. It is
// refused with a *DraftExistsError while a draft exists, unless Force
// (the draft is kept), and with ErrNoVersion for an unknown version.
type Rollback struct {
	Version uint64
	User    string
	Scope   []string
	Force   bool
	Message string
	// Now and Keep are set by Store.Apply when zero: the leader's time
	// and Config.KeepVersions.
	Now  time.Time
	Keep int
}

// RestoreVersions stores the versions of a backup. With Replace, every
// version is deleted first. Numbers must grow, and exceed those stored.
type RestoreVersions struct {
	Replace  bool
	Next     uint64
	Versions []VersionTree
}

// deployVersion is the form of Deploy and DeployScoped written from
// LevelVersions on (Store.Apply turns them into it).
type deployVersion struct {
	ID, User string
	Scope    []string
	Message  string
	Now      time.Time
	Keep     int
}

type (
	deployVersionPayload struct {
		ID      string   `json:"id"`
		User    string   `json:"user"`
		Scope   []string `json:"scope,omitempty"`
		NowMS   int64    `json:"now_ms"`
		Message string   `json:"message,omitempty"`
		Keep    int      `json:"keep"`
	}
	rollbackPayload struct {
		Version uint64   `json:"version"`
		User    string   `json:"user"`
		Scope   []string `json:"scope,omitempty"`
		Force   bool     `json:"force,omitempty"`
		NowMS   int64    `json:"now_ms"`
		Message string   `json:"message,omitempty"`
		Keep    int      `json:"keep"`
	}
	restoreVersionsPayload struct {
		Replace  bool          `json:"replace,omitempty"`
		Next     uint64        `json:"next"`
		Versions []VersionTree `json:"versions"`
	}
)

var (
	_ Command = deployVersion{}
	_ Command = Rollback{}
	_ Command = RestoreVersions{}
)

func (deployVersion) cmdType() cmdType   { return typeDeployVersion }
func (Rollback) cmdType() cmdType        { return typeRollback }
func (RestoreVersions) cmdType() cmdType { return typeRestoreVersions }

func (c deployVersion) payload() (any, error) {
	if c.ID == "" || c.User == "" {
		return nil, fmt.Errorf("%w: deploy needs a draft id and a user", ErrInvalidCommand)
	}
	if err := checkVersionFields(c.Message, c.Keep); err != nil {
		return nil, err
	}
	return deployVersionPayload{ID: c.ID, User: c.User, Scope: c.Scope, NowMS: c.Now.UnixMilli(), Message: c.Message, Keep: c.Keep}, nil
}

func (c Rollback) payload() (any, error) {
	if c.Version == 0 || c.User == "" {
		return nil, fmt.Errorf("%w: rollback needs a version and a user", ErrInvalidCommand)
	}
	if err := checkVersionFields(c.Message, c.Keep); err != nil {
		return nil, err
	}
	return rollbackPayload{Version: c.Version, User: c.User, Scope: c.Scope, Force: c.Force, NowMS: c.Now.UnixMilli(), Message: c.Message, Keep: c.Keep}, nil
}

func (c RestoreVersions) payload() (any, error) {
	return restoreVersionsPayload(c), nil
}

// CheckVersionMessage checks a version's message: valid UTF-8 of at most
// MaxVersionMessage bytes.
func CheckVersionMessage(msg string) error {
	if len(msg) > MaxVersionMessage || !utf8.ValidString(msg) {
		return fmt.Errorf("%w: a version message is valid UTF-8 of at most %d bytes (got %d bytes)", ErrInvalidCommand, MaxVersionMessage, len(msg))
	}
	return nil
}

func checkVersionFields(msg string, keep int) error {
	if err := CheckVersionMessage(msg); err != nil {
		return err
	}
	if keep < 1 || keep > MaxKeepVersions {
		return fmt.Errorf("%w: versions kept %d is not between 1 and %d", ErrInvalidCommand, keep, MaxKeepVersions)
	}
	return nil
}

// The state file's versions: bucket "versions" maps the number (uint64
// big-endian) to the Version's JSON; bucket "version_trees" maps a hash
// (hex) to the export file, shared by the versions of that hash. The
// state bucket's "next_version" key is the next number.
var (
	bucketVersions     = []byte("versions")
	bucketVersionTrees = []byte("version_trees")
	keyNextVersion     = []byte("next_version")
)

// formatVersions is the state file format from which it may hold versions.
const formatVersions = 6

// treeHash returns the hex SHA-256 of an export file.
func treeHash(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// TreeHash returns the content hash versions record for tree: the SHA-256
// of its export file in the form the store writes.
func TreeHash(tree *config.Node) (string, error) {
	raw, err := encodeTree(tree)
	if err != nil {
		return "", err
	}
	return treeHash(raw), nil
}

func versionKey(n uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, n)
}

// readVersions loads the versions' metadata, oldest first.
func readVersions(tx *bolt.Tx, st *state) error {
	var err error
	if st.nextVersion, err = getUint64(tx.Bucket(bucketState), keyNextVersion); err != nil {
		return err
	}
	b := tx.Bucket(bucketVersions)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		var ver Version
		if err := json.Unmarshal(v, &ver); err != nil {
			return fmt.Errorf("version %x: %w", k, err)
		}
		st.versions = append(st.versions, ver)
		return nil
	})
}

// versionBuckets returns the buckets of the versions and of their trees,
// created if missing, and raises the state file to the format that has
// them.
func versionBuckets(tx *bolt.Tx) (vb, tb *bolt.Bucket, err error) {
	if vb, err = tx.CreateBucketIfNotExists(bucketVersions); err != nil {
		return nil, nil, err
	}
	if tb, err = tx.CreateBucketIfNotExists(bucketVersionTrees); err != nil {
		return nil, nil, err
	}
	if err = raiseFormat(tx, formatVersions); err != nil {
		return nil, nil, err
	}
	return vb, tb, nil
}

// recordVersion stores v, with the next number, the tree's export file
// raw and its tests, and prunes the oldest versions beyond keep.
func recordVersion(tx *bolt.Tx, st *state, v Version, tree *config.Node, raw []byte, tests []TestFile, keep int) (Version, error) {
	vb, tb, err := versionBuckets(tx)
	if err != nil {
		return v, err
	}
	v.Number = max(st.nextVersion, 1)
	if n := len(st.versions); n > 0 {
		v.Number = max(v.Number, st.versions[n-1].Number+1)
	}
	v.Hash = treeHash(raw)
	v.Nodes, v.Rules = treeCounts(tree)
	if v.TestsHash, err = storeVersionTests(tx, tests); err != nil {
		return v, err
	}
	if tb.Get([]byte(v.Hash)) == nil {
		if err := tb.Put([]byte(v.Hash), packTree(raw)); err != nil {
			return v, err
		}
	}
	if err := putVersion(vb, v); err != nil {
		return v, err
	}
	st.nextVersion = v.Number + 1
	if err := putUint64(tx.Bucket(bucketState), keyNextVersion, st.nextVersion); err != nil {
		return v, err
	}
	vers := append(slices.Clip(st.versions), v)
	if len(vers) > keep {
		cut := len(vers) - keep
		kept := vers[cut:]
		for _, old := range vers[:cut] {
			if err := vb.Delete(versionKey(old.Number)); err != nil {
				return v, err
			}
			if !slices.ContainsFunc(kept, func(k Version) bool { return k.Hash == old.Hash }) {
				if err := tb.Delete([]byte(old.Hash)); err != nil {
					return v, err
				}
			}
			if old.TestsHash != "" && !slices.ContainsFunc(kept, func(k Version) bool { return k.TestsHash == old.TestsHash }) {
				if err := tx.Bucket(bucketVersionTests).Delete([]byte(old.TestsHash)); err != nil {
					return v, err
				}
			}
		}
		vers = slices.Clone(kept)
	}
	st.versions = vers
	return v, nil
}

func putVersion(b *bolt.Bucket, v Version) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(versionKey(v.Number), raw)
}

// treeCounts returns the number of nodes and of rules of tree.
func treeCounts(tree *config.Node) (nodes, rules int) {
	tree.Walk(func(_ []string, n *config.Node) bool {
		nodes++
		rules += len(n.Rules)
		return true
	})
	return nodes, rules
}

// versionTreeJSON returns the export file of the tree of hash, a new
// slice (it does not alias the state file).
func versionTreeJSON(tx *bolt.Tx, hash string) ([]byte, error) {
	return unpackStored(tx, bucketVersionTrees, hash, "version tree")
}

// unpackStored returns what bucket holds under hash, packed (packTree),
// unpacked into a new slice; what names it in errors.
func unpackStored(tx *bolt.Tx, bucket []byte, hash, what string) ([]byte, error) {
	var packed []byte
	if b := tx.Bucket(bucket); b != nil {
		packed = b.Get([]byte(hash))
	}
	if packed == nil {
		return nil, fmt.Errorf("%s %s: not stored", what, hash)
	}
	raw, err := unpackTree(packed)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, hash, err)
	}
	return raw, nil
}

// treeDeflate is the first byte of a stored version tree: DEFLATE
// (RFC 1951) of the export file follows. Export files compress about
// tenfold, and a version is stored per distinct tree, so the state file
// holds the last versions of a large tree without growing by its whole
// size each time. The compressed bytes may differ between Go releases;
// only the export file they hold (and its hash) is part of the state.
const treeDeflate = 1

// packTree returns the stored form of an export file.
func packTree(raw []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(raw)/8 + 64)
	buf.WriteByte(treeDeflate)
	w, _ := flate.NewWriter(&buf, flate.BestSpeed) // a valid level: no error
	_, _ = w.Write(raw)                            // writes to a bytes.Buffer do not fail
	_ = w.Close()
	return buf.Bytes()
}

// unpackTree returns the export file of a stored version tree.
func unpackTree(packed []byte) ([]byte, error) {
	if len(packed) == 0 || packed[0] != treeDeflate {
		return nil, errors.New("unknown stored form")
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(packed[1:])))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	return raw, nil
}

// findVersion returns the version numbered n of st.
func findVersion(st *state, n uint64) (Version, bool) {
	i, ok := slices.BinarySearchFunc(st.versions, n, func(v Version, n uint64) int {
		switch {
		case v.Number < n:
			return -1
		case v.Number > n:
			return 1
		}
		return 0
	})
	if !ok {
		return Version{}, false
	}
	return st.versions[i], true
}

// applyDeployVersion applies a DeployVersion entry, or with tested a
// deployTested one: a deploy that records a version, with the draft's
// tests.
func applyDeployVersion(b *bolt.Bucket, st *state, idx uint64, p *deployVersionPayload, tested *Tested, setActive func(*config.Node, []byte) error) (error, error) {
	if err := checkVersionFields(p.Message, p.Keep); err != nil {
		return err, nil
	}
	if st.draft == nil || st.draft.ID != p.ID {
		return fmt.Errorf("draft %s: %w", p.ID, ErrNoDraft), nil
	}
	if st.draft.Owner != p.User {
		return &NotOwnerError{DraftID: p.ID, Owner: st.draft.Owner}, nil
	}
	if len(p.Scope) > 1 {
		if paths := config.DiffOutside(st.active, st.draft.Tree, p.Scope); len(paths) > 0 {
			return &OutOfScopeError{Scope: p.Scope, Paths: paths}, nil
		}
	}
	encoded, refused, err := checkTested(st, tested)
	if refused != nil || err != nil {
		return refused, err
	}
	if err := deployDraftEncoded(b, st, encoded, setActive); err != nil {
		return nil, err
	}
	if err := setActiveTests(b, st, st.draft.Tests); err != nil {
		return nil, err
	}
	v := Version{Index: idx, Author: p.User, TimeMS: p.NowMS, Message: p.Message, Scope: scopeOf(p.Scope)}
	_, err = recordVersion(b.Tx(), st, v, st.active, st.activeJSON, st.activeTests, p.Keep)
	return nil, err
}

// scopeOf returns a scope worth recording: nil for the root alone.
func scopeOf(scope []string) []string {
	if len(scope) <= 1 {
		return nil
	}
	return slices.Clone(scope)
}

// applyRollback applies a Rollback entry. The first error is the refusal,
// the second a failed write.
func applyRollback(b *bolt.Bucket, st *state, idx uint64, p *rollbackPayload, rules config.Rules, setActive func(*config.Node, []byte) error) (error, error) {
	if err := checkVersionFields(p.Message, p.Keep); err != nil {
		return err, nil
	}
	if p.User == "" {
		return fmt.Errorf("%w: rollback needs a user", ErrInvalidCommand), nil
	}
	v, ok := findVersion(st, p.Version)
	if !ok {
		return fmt.Errorf("version %d: %w", p.Version, ErrNoVersion), nil
	}
	if st.draft != nil && !p.Force {
		return &DraftExistsError{DraftID: st.draft.ID, Owner: st.draft.Owner}, nil
	}
	raw, err := versionTreeJSON(b.Tx(), v.Hash)
	if err != nil {
		return nil, err
	}
	tree, err := decodeTree(raw, rules)
	if err != nil {
		return fmt.Errorf("version %d: %w", p.Version, err), nil
	}
	if len(p.Scope) > 1 {
		tree, err = graft(st.active, tree, p.Scope)
		if err != nil {
			return err, nil
		}
		if err := config.ValidateRules(tree, rules); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTree, err), nil
		}
		if raw, err = encodeTree(tree); err != nil {
			return nil, err
		}
	}
	// The version's tests come back with its tree; a scoped rollback,
	// which brings back one subtree, keeps the active tree's.
	tests := st.activeTests
	if len(p.Scope) <= 1 {
		if tests, err = versionTests(b.Tx(), v.TestsHash); err != nil {
			return nil, err
		}
	}
	if err := setActive(tree, raw); err != nil {
		return nil, err
	}
	if err := setActiveTests(b, st, tests); err != nil {
		return nil, err
	}
	nv := Version{Index: idx, Author: p.User, TimeMS: p.NowMS, Message: p.Message, RollbackOf: v.Number, Scope: scopeOf(p.Scope)}
	_, err = recordVersion(b.Tx(), st, nv, tree, raw, tests, p.Keep)
	return nil, err
}

// graft returns active with its subtree at scope replaced by from's. The
// scope node must be in both trees, with the same isolating fields (a
// scoped token does not change them, decision 19). active is not
// modified: the nodes on the way to scope are copied.
func graft(active, from *config.Node, scope []string) (*config.Node, error) {
	if active.Name != scope[0] || from.Name != scope[0] {
		return nil, &OutOfScopeError{Scope: scope, Paths: []string{config.PathString(scope[:1])}}
	}
	sub := from.Find(scope[1:])
	cur := active.Find(scope[1:])
	if sub == nil || cur == nil {
		return nil, fmt.Errorf("%w: the version or the active tree has no node %s", ErrNoVersionNode, config.PathString(scope))
	}
	if !config.SameIsolation(cur, sub) {
		return nil, &OutOfScopeError{Scope: scope, Paths: []string{config.PathString(scope)}}
	}
	var replace func(n *config.Node, rest []string) *config.Node
	replace = func(n *config.Node, rest []string) *config.Node {
		if len(rest) == 0 {
			return sub
		}
		c := *n
		c.Children = slices.Clone(n.Children)
		for i, ch := range c.Children {
			if ch.Name == rest[0] {
				c.Children[i] = replace(ch, rest[1:])
			}
		}
		return &c
	}
	return replace(active, scope[1:]), nil
}

// ErrNoVersionNode means a scoped rollback's node is missing from the
// version or from the active tree.
var ErrNoVersionNode = errors.New("no such node in the version")

// applyRestoreVersions applies a RestoreVersions entry.
func applyRestoreVersions(tx *bolt.Tx, st *state, p *restoreVersionsPayload) (error, error) {
	last := uint64(0)
	if !p.Replace && len(st.versions) > 0 {
		last = st.versions[len(st.versions)-1].Number
	}
	for _, v := range p.Versions {
		if v.Number <= last {
			return fmt.Errorf("%w: restored version %d does not follow %d", ErrInvalidCommand, v.Number, last), nil
		}
		last = v.Number
	}
	if p.Replace {
		for _, name := range [][]byte{bucketVersions, bucketVersionTrees, bucketVersionTests} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return nil, err
				}
			}
		}
		st.versions = nil
	}
	vb, tb, err := versionBuckets(tx)
	if err != nil {
		return nil, err
	}
	vers := slices.Clip(st.versions)
	for _, vt := range p.Versions {
		v := vt.Version
		v.Hash = treeHash(vt.Tree)
		if err := CheckTestFiles(vt.Tests); err != nil {
			return fmt.Errorf("restored version %d: %w", v.Number, err), nil
		}
		if v.TestsHash, err = storeVersionTests(tx, vt.Tests); err != nil {
			return nil, err
		}
		if tb.Get([]byte(v.Hash)) == nil {
			if err := tb.Put([]byte(v.Hash), packTree(vt.Tree)); err != nil {
				return nil, err
			}
		}
		if err := putVersion(vb, v); err != nil {
			return nil, err
		}
		vers = append(vers, v)
	}
	st.versions = vers
	st.nextVersion = max(st.nextVersion, p.Next, last+1)
	return nil, putUint64(tx.Bucket(bucketState), keyNextVersion, st.nextVersion)
}

// Versions returns the recorded versions, newest first, from this node's
// state.
func (s *Store) Versions() []Version {
	f := s.fsm.Load()
	if f == nil {
		return nil
	}
	f.mu.RLock()
	vers := f.st.versions
	f.mu.RUnlock()
	out := make([]Version, len(vers))
	for i, v := range vers {
		v.Scope = slices.Clone(v.Scope) // the state's is shared
		out[len(vers)-1-i] = v
	}
	return out
}

// Version returns version n and its tree's export file (ErrNoVersion when
// the state holds no such version).
func (s *Store) Version(n uint64) (Version, []byte, error) {
	f := s.fsm.Load()
	if f == nil {
		return Version{}, nil, ErrNotOpen
	}
	var v Version
	var raw []byte
	err := f.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVersions)
		var rec []byte
		if b != nil {
			rec = b.Get(versionKey(n))
		}
		if rec == nil {
			return fmt.Errorf("version %d: %w", n, ErrNoVersion)
		}
		if err := json.Unmarshal(rec, &v); err != nil {
			return fmt.Errorf("version %d: %w", n, err)
		}
		var err error
		raw, err = versionTreeJSON(tx, v.Hash)
		return err
	})
	if err != nil {
		return Version{}, nil, err
	}
	return v, raw, nil
}

// VersionTree returns version n and its tree.
func (s *Store) VersionTree(n uint64) (Version, *config.Node, error) {
	v, raw, err := s.Version(n)
	if err != nil {
		return v, nil, err
	}
	ex, err := config.DecodeExport(raw)
	if err != nil {
		return v, nil, fmt.Errorf("version %d: %w", n, err)
	}
	return v, ex.Node, nil
}

// RollbackTo submits a Rollback with sess (nil: none; see Apply) and
// returns the result: Result.Err holds a refusal.
func (s *Store) RollbackTo(ctx context.Context, sess *Session, c Rollback) (Result, error) {
	return s.Apply(ctx, sess, c)
}

// DeployVersion deploys draft id, owned by user, limited to scope (see
// DeployScoped), recording message with the version the deploy makes
// from LevelVersions on (below it, the message is dropped: no version is
// recorded).
func (s *Store) DeployVersion(ctx context.Context, sess *Session, id, user string, scope []string, message string) (uint64, error) {
	if err := CheckVersionMessage(message); err != nil {
		return 0, err
	}
	if len(scope) <= 1 {
		return s.do(ctx, sess, Deploy{ID: id, User: user, Message: message})
	}
	return s.do(ctx, sess, DeployScoped{ID: id, User: user, Scope: scope, Message: message})
}

// versioned returns cmd in the form the leader writes at level: deploys
// become deployVersion from LevelVersions on; version commands below it
// are ErrLevel. Now and Keep are filled in.
func (s *Store) versioned(cmd Command, level int) (Command, error) {
	now := s.now()
	keep := s.cfg.KeepVersions
	switch c := cmd.(type) {
	case Deploy:
		if level >= LevelDraftTests && c.Tested != nil {
			return deployTested{deployVersion{ID: c.ID, User: c.User, Message: c.Message, Now: now, Keep: keep}, *c.Tested}, nil
		}
		if level >= LevelVersions {
			return deployVersion{ID: c.ID, User: c.User, Message: c.Message, Now: now, Keep: keep}, nil
		}
	case DeployScoped:
		if level >= LevelDraftTests && c.Tested != nil {
			return deployTested{deployVersion{ID: c.ID, User: c.User, Scope: c.Scope, Message: c.Message, Now: now, Keep: keep}, *c.Tested}, nil
		}
		if level >= LevelVersions {
			return deployVersion{ID: c.ID, User: c.User, Scope: c.Scope, Message: c.Message, Now: now, Keep: keep}, nil
		}
	case SetDraftTests:
		if level < LevelDraftTests {
			return nil, levelError("attaching tests to the draft", LevelDraftTests, level)
		}
	case RestoreState:
		if level < LevelDraftTests && (len(c.ActiveTests) > 0 || c.Draft != nil && len(c.Draft.Tests) > 0) {
			return nil, levelError("restoring tests", LevelDraftTests, level)
		}
	case Rollback:
		if level < LevelVersions {
			return nil, fmt.Errorf("%w: rolling back needs feature level %d on every master (the cluster is at %d): upgrade them all", ErrLevel, LevelVersions, level)
		}
		if c.Now.IsZero() {
			c.Now = now
		}
		if c.Keep == 0 {
			c.Keep = keep
		}
		return c, nil
	case RestoreVersions:
		if level < LevelVersions {
			return nil, fmt.Errorf("%w: restoring versions needs feature level %d on every master (the cluster is at %d)", ErrLevel, LevelVersions, level)
		}
		if level < LevelDraftTests && slices.ContainsFunc(c.Versions, func(v VersionTree) bool { return len(v.Tests) > 0 }) {
			return nil, levelError("restoring versions' tests", LevelDraftTests, level)
		}
	case SaveBacktest, DeleteBacktests:
		if level < LevelBacktests {
			return nil, levelError("keeping backtests in the replicated state", LevelBacktests, level)
		}
	case AssignIDs:
		if level < LevelTypedIDs {
			return nil, fmt.Errorf("%w: assigning ids needs feature level %d on every master (the cluster is at %d)", ErrLevel, LevelTypedIDs, level)
		}
	}
	return cmd, nil
}

// levelError is the ErrLevel of what, which needs level (the cluster is
// at cluster).
func levelError(what string, level, cluster int) error {
	return fmt.Errorf("%w: %s needs feature level %d on every master (the cluster is at %d): upgrade them all", ErrLevel, what, level, cluster)
}

// setActiveTests records files as the active tree's tests.
func setActiveTests(b *bolt.Bucket, st *state, files []TestFile) error {
	if err := putTests(b, keyActiveTests, files); err != nil {
		return err
	}
	st.activeTests = files
	return nil
}
