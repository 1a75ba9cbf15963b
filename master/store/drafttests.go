package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Rule tests attached to the draft (docs/decisions.md decision 62): from
// feature level LevelDraftTests on, the draft holds a set of named test
// files (engine/ruletest's format, which the store keeps as JSON without
// reading it), replicated with it. A new draft starts with the tests of
// the active tree; a deploy runs them first (the API does, with the
// engines' compiler) and its entry names the draft it tested (Tested),
// which applying compares with the draft of that moment; the active tree
// and every version keep the tests they were deployed with, and a
// rollback brings a version's tests back with its tree.

// LevelDraftTests is the feature level from which the draft holds tests:
// the SetDraftTests and tested deploy entries exist, and restores and
// backups carry the tests. Below it setting tests is refused with
// ErrLevel.
const LevelDraftTests = 5

// The limits of a draft's tests, checked by the API and again when the
// entry is applied.
const (
	// MaxTestFiles bounds the number of test files.
	MaxTestFiles = 100
	// MaxTestsBytes bounds the size of all test files together (their
	// compact JSON).
	MaxTestsBytes = 1 << 20
	// MaxTestFileName bounds a test file's name, in bytes.
	MaxTestFileName = 128
)

// The draft tests' command types.
const (
	typeSetDraftTests cmdType = 26
	typeDeployTested  cmdType = 27
)

var (
	// ErrDraftChanged means a deploy was refused because the draft or its
	// tests changed after the tests ran: what was tested is not what
	// would be deployed.
	ErrDraftChanged = errors.New("the draft changed after its tests ran")
	// ErrTestsNotRun means a deploy of a draft with tests was refused
	// because it did not say which draft it tested (a client of the store
	// that does not run tests).
	ErrTestsNotRun = errors.New("the draft has tests and the deploy did not run them")
)

// TestFile is one test file of a draft: its name and its content, a JSON
// document (engine/ruletest's format, checked by the API).
type TestFile struct {
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`
}

// CheckTestFiles checks a set of test files: at most MaxTestFiles, sorted
// by name without duplicates, names of 1 to MaxTestFileName letters,
// digits, '.', '_' and '-' not starting with '.', contents that are JSON
// objects, MaxTestsBytes in all. Its errors match ErrInvalidCommand.
func CheckTestFiles(files []TestFile) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidCommand, fmt.Sprintf(format, args...))
	}
	if len(files) > MaxTestFiles {
		return bad("%d test files, at most %d", len(files), MaxTestFiles)
	}
	size := 0
	for i, f := range files {
		if err := checkTestFileName(f.Name); err != nil {
			return bad("test file %d: %v", i, err)
		}
		if i > 0 && files[i-1].Name >= f.Name {
			return bad("test file %q: the files are sorted by name, each name once", f.Name)
		}
		c := bytes.TrimSpace(f.Content)
		if len(c) == 0 || c[0] != '{' || !json.Valid(c) {
			return bad("test file %q: the content is not a JSON object", f.Name)
		}
		size += len(f.Content)
	}
	if size > MaxTestsBytes {
		return bad("the test files hold %d bytes, at most %d", size, MaxTestsBytes)
	}
	return nil
}

// checkTestFileName checks a test file's name.
func checkTestFileName(name string) error {
	if name == "" || len(name) > MaxTestFileName {
		return fmt.Errorf("a test file's name has 1 to %d bytes (got %d)", MaxTestFileName, len(name))
	}
	if name[0] == '.' {
		return fmt.Errorf("test file name %q starts with a dot", name)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("test file name %q: letters, digits, '.', '_' and '-' only", name)
		}
	}
	return nil
}

// encodeTests returns the stored form of test files (nil for none): their
// JSON array, compact and with HTML characters escaped, which is also
// what their hash is computed over.
func encodeTests(files []TestFile) ([]byte, error) {
	if len(files) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(files)
	if err != nil {
		return nil, fmt.Errorf("encode tests: %w", err)
	}
	return b, nil
}

// decodeTests reads the stored form of test files.
func decodeTests(raw []byte) ([]TestFile, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var files []TestFile
	if err := json.Unmarshal(raw, &files); err != nil {
		return nil, fmt.Errorf("decode tests: %w", err)
	}
	return files, nil
}

// TestsHash returns the hex SHA-256 of test files' stored form ("" for
// none).
func TestsHash(files []TestFile) (string, error) {
	raw, err := encodeTests(files)
	if err != nil || raw == nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// Tested names the draft a deploy ran the tests of: the hashes of its
// tests and of its tree. It is zero for a draft without tests, which a
// deploy does not check further.
type Tested struct {
	Tests string `json:"tests,omitempty"`
	Tree  string `json:"tree,omitempty"`
}

// TestedOf returns what a deploy that ran d's tests names.
func TestedOf(d *Draft) (Tested, error) {
	if d == nil || len(d.Tests) == 0 {
		return Tested{}, nil
	}
	tests, err := TestsHash(d.Tests)
	if err != nil {
		return Tested{}, err
	}
	tree, err := TreeHash(d.Tree)
	if err != nil {
		return Tested{}, err
	}
	return Tested{Tests: tests, Tree: tree}, nil
}

// SetDraftTests replaces the tests of draft ID, owned by User. It is
// refused with ErrNoDraft, a *NotOwnerError, or ErrInvalidCommand for
// files CheckTestFiles refuses.
type SetDraftTests struct {
	ID    string
	User  string
	Tests []TestFile
	// Now becomes the draft's updated timestamp.
	Now time.Time
}

// deployTested is the form of a deploy that ran the draft's tests,
// written from LevelDraftTests on (Store.Apply turns Deploy and
// DeployScoped with Tested set into it).
type deployTested struct {
	deployVersion
	Tested Tested
}

type (
	setDraftTestsPayload struct {
		ID    string     `json:"id"`
		User  string     `json:"user"`
		Tests []TestFile `json:"tests"`
		NowMS int64      `json:"now_ms"`
	}
	deployTestedPayload struct {
		deployVersionPayload
		Tested Tested `json:"tested"`
	}
)

var (
	_ Command = SetDraftTests{}
	_ Command = deployTested{}
)

func (SetDraftTests) cmdType() cmdType { return typeSetDraftTests }
func (deployTested) cmdType() cmdType  { return typeDeployTested }

func (c SetDraftTests) payload() (any, error) {
	if c.ID == "" || c.User == "" {
		return nil, fmt.Errorf("%w: setting draft tests needs a draft id and a user", ErrInvalidCommand)
	}
	if err := CheckTestFiles(c.Tests); err != nil {
		return nil, err
	}
	tests := c.Tests
	if tests == nil {
		tests = []TestFile{}
	}
	return setDraftTestsPayload{ID: c.ID, User: c.User, Tests: tests, NowMS: c.Now.UnixMilli()}, nil
}

func (c deployTested) payload() (any, error) {
	p, err := c.deployVersion.payload()
	if err != nil {
		return nil, err
	}
	return deployTestedPayload{deployVersionPayload: p.(deployVersionPayload), Tested: c.Tested}, nil
}

// The state file's tests: keys of the state bucket holding the stored
// form of the draft's and of the active tree's tests (absent: none);
// bucket "version_tests" maps a tests hash to the stored form (packed as
// version trees are), shared by the versions of that hash.
var (
	keyDraftTests      = []byte("draft_tests")
	keyActiveTests     = []byte("active_tests")
	bucketVersionTests = []byte("version_tests")
)

// formatTests is the state file format from which it may hold tests.
const formatTests = 8

// putTests stores files under key of the state bucket (deletes it for
// none).
func putTests(b *bolt.Bucket, key []byte, files []TestFile) error {
	raw, err := encodeTests(files)
	if err != nil {
		return err
	}
	if raw == nil {
		return b.Delete(key)
	}
	if err := raiseFormat(b.Tx(), formatTests); err != nil {
		return err
	}
	return b.Put(key, raw)
}

// readTests reads the tests stored under key of the state bucket.
func readTests(b *bolt.Bucket, key []byte) ([]TestFile, error) {
	files, err := decodeTests(b.Get(key))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return files, nil
}

// storeVersionTests stores files in the version tests bucket and returns
// their hash ("" for none).
func storeVersionTests(tx *bolt.Tx, files []TestFile) (string, error) {
	raw, err := encodeTests(files)
	if err != nil || raw == nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])
	b, err := tx.CreateBucketIfNotExists(bucketVersionTests)
	if err != nil {
		return "", err
	}
	if err := raiseFormat(tx, formatTests); err != nil {
		return "", err
	}
	if b.Get([]byte(hash)) == nil {
		if err := b.Put([]byte(hash), packTree(raw)); err != nil {
			return "", err
		}
	}
	return hash, nil
}

// versionTests returns the tests stored under hash (none for "").
func versionTests(tx *bolt.Tx, hash string) ([]TestFile, error) {
	if hash == "" {
		return nil, nil
	}
	raw, err := unpackStored(tx, bucketVersionTests, hash, "version tests")
	if err != nil {
		return nil, err
	}
	return decodeTests(raw)
}

// applySetDraftTests applies a SetDraftTests entry. The first error is
// the refusal, the second a failed write.
func applySetDraftTests(b *bolt.Bucket, st *state, p *setDraftTestsPayload) (error, error) {
	if st.draft == nil || st.draft.ID != p.ID {
		return fmt.Errorf("draft %s: %w", p.ID, ErrNoDraft), nil
	}
	if st.draft.Owner != p.User {
		return &NotOwnerError{DraftID: p.ID, Owner: st.draft.Owner}, nil
	}
	if err := CheckTestFiles(p.Tests); err != nil {
		return err, nil
	}
	dr := *st.draft
	dr.Tests, dr.UpdatedMS = slices.Clip(p.Tests), p.NowMS
	if len(dr.Tests) == 0 {
		dr.Tests = nil
	}
	if err := putDraft(b, &dr, st.draftJSON); err != nil {
		return nil, err
	}
	if err := putTests(b, keyDraftTests, dr.Tests); err != nil {
		return nil, err
	}
	st.draft = &dr
	return nil, nil
}

// checkTested checks, for a deploy, that the draft is the one its tests
// ran on (tested nil: a deploy that ran none, refused when the draft has
// tests). It returns the export file of the draft's tree when it encoded
// it (encodeTree), which the deploy stores rather than encoding it again.
func checkTested(st *state, tested *Tested) (raw json.RawMessage, refused, err error) {
	if tested == nil {
		if len(st.draft.Tests) > 0 {
			return nil, ErrTestsNotRun, nil
		}
		return nil, nil, nil
	}
	var cur Tested
	if len(st.draft.Tests) > 0 {
		if cur.Tests, err = TestsHash(st.draft.Tests); err != nil {
			return nil, nil, err
		}
		if raw, err = encodeTree(st.draft.Tree); err != nil {
			return nil, nil, err
		}
		cur.Tree = treeHash(raw)
	}
	if cur != *tested {
		return nil, fmt.Errorf("%w: deploy again to run the tests of the draft as it is now", ErrDraftChanged), nil
	}
	return raw, nil, nil
}

// SetDraftTests replaces the tests of draft id, owned by user, submitted
// with sess (nil: none; see Apply). Below LevelDraftTests it is ErrLevel.
func (s *Store) SetDraftTests(ctx context.Context, sess *Session, id, user string, files []TestFile) error {
	if err := CheckTestFiles(files); err != nil {
		return err
	}
	_, err := s.do(ctx, sess, SetDraftTests{ID: id, User: user, Tests: files, Now: s.now()})
	return err
}

// DeployTested deploys draft id as DeployVersion does, for a caller that
// ran the draft's tests on the draft tested names (TestedOf): applying
// it refuses with ErrDraftChanged a draft that is no longer that one.
// Below LevelDraftTests tested is not written (no draft has tests).
func (s *Store) DeployTested(ctx context.Context, sess *Session, id, user string, scope []string, message string, tested Tested) (uint64, error) {
	if err := CheckVersionMessage(message); err != nil {
		return 0, err
	}
	if len(scope) <= 1 {
		return s.do(ctx, sess, Deploy{ID: id, User: user, Message: message, Tested: &tested})
	}
	return s.do(ctx, sess, DeployScoped{ID: id, User: user, Scope: scope, Message: message, Tested: &tested})
}

// ActiveTests returns the tests of the active tree, from this node's
// state.
func (s *Store) ActiveTests() []TestFile {
	f := s.fsm.Load()
	if f == nil {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.st.activeTests)
}

// VersionTests returns the tests version n was deployed with (none when
// it had none; ErrNoVersion when the state holds no such version).
func (s *Store) VersionTests(n uint64) ([]TestFile, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	var files []TestFile
	err := f.view(func(tx *bolt.Tx) error {
		var rec []byte
		if b := tx.Bucket(bucketVersions); b != nil {
			rec = b.Get(versionKey(n))
		}
		if rec == nil {
			return fmt.Errorf("version %d: %w", n, ErrNoVersion)
		}
		var v Version
		if err := json.Unmarshal(rec, &v); err != nil {
			return fmt.Errorf("version %d: %w", n, err)
		}
		var err error
		files, err = versionTests(tx, v.TestsHash)
		return err
	})
	return files, err
}
