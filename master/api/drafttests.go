package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/ruletest"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// DraftTestsPath is the root of the draft's rule tests API (docs/api.md,
// "Draft tests"; docs/decisions.md decision 62):
//
//	GET  /squall/v1/draft/tests       the draft's test files and their cases (view)
//	PUT  /squall/v1/draft/tests       replace them (edit, the draft's owner, at the root)
//	POST /squall/v1/draft/tests/run   run them against the draft (view)
//
// Each takes the authorization in the auth query parameter (optional when
// the token has one) and, optionally, the draft's id in the draft query
// parameter (the request is refused when the draft is another). A deploy
// runs the tests first (deployDraft). Every route needs feature level
// store.LevelDraftTests on every master.
const DraftTestsPath = "/squall/v1/draft/tests"

// maxTestsBody bounds the body of PUT DraftTestsPath: the test files'
// limit and room for the JSON around them.
const maxTestsBody = store.MaxTestsBytes + 256<<10

// maxTestCases bounds the cases of a draft's tests, all files together.
const maxTestCases = 10_000

// DraftTestsStore is what the draft tests API needs of the store.
// *store.Store implements it.
type DraftTestsStore interface {
	DraftView() (*store.Draft, error)
	ClusterFeatureLevel() int
	SetDraftTests(ctx context.Context, sess *store.Session, id, user string, files []store.TestFile) error
}

var _ DraftTestsStore = (*store.Store)(nil)

// TestFileBody is a test file as the API sends and receives it: its name
// and its content, a test file of engine/ruletest's format.
type TestFileBody struct {
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`
}

// DraftTestsBody is the body of PUT DraftTestsPath: every test file of
// the draft (an empty list removes them).
type DraftTestsBody struct {
	Files []TestFileBody `json:"files"`
}

// DraftTestsView is the answer of GET and PUT DraftTestsPath.
type DraftTestsView struct {
	Draft string `json:"draft"`
	Owner string `json:"owner"`
	// Tested is the hash of the tests (store.TestsHash; "" for none).
	Tested string         `json:"tests_hash,omitempty"`
	Cases  int            `json:"cases"`
	Files  []TestFileView `json:"files"`
}

// TestFileView is a test file and the names of its cases.
type TestFileView struct {
	Name    string          `json:"name"`
	Cases   []string        `json:"cases"`
	Content json.RawMessage `json:"content"`
}

// TestRun is the outcome of running a draft's tests: the answer of POST
// DraftTestsPath/run, and the details of a deploy refused with
// TESTS_FAILED.
type TestRun struct {
	Draft  string `json:"draft"`
	Passed bool   `json:"passed"`
	Cases  int    `json:"cases"`
	Failed int    `json:"failed"`
	// Tested is what a deploy of the draft as it was run names
	// (store.TestedOf).
	Tested store.Tested     `json:"tested"`
	Files  []TestFileResult `json:"files"`
}

// TestFileResult is the outcome of one test file.
type TestFileResult struct {
	File  string           `json:"file"`
	Cases []TestCaseResult `json:"cases"`
}

// TestCaseResult is the outcome of one case: passed when it has no
// failures, each also written on one line in Text.
type TestCaseResult struct {
	Name     string        `json:"name"`
	Passed   bool          `json:"passed"`
	Failures []TestFailure `json:"failures,omitempty"`
}

// TestFailure is an expectation that did not hold (ruletest.Failure).
type TestFailure struct {
	Rule        string `json:"rule"`
	Expectation string `json:"expectation"`
	Expected    string `json:"expected"`
	Got         string `json:"got"`
	// Text is the failure on one line.
	Text string `json:"text"`
}

// DraftTestsHandler returns the draft tests API's routes, to mount at
// DraftTestsPath and DraftTestsPath+"/" on the leader with request ids.
func (a *API) DraftTestsHandler(ts DraftTestsStore) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, perm auth.Permission, fn handlerFunc) {
		mux.Handle(pattern, a.wrapQueryAuth(perm, func(w http.ResponseWriter, r *http.Request) (any, error) {
			if level := ts.ClusterFeatureLevel(); level < store.LevelDraftTests {
				return nil, &Error{Status: http.StatusConflict, Code: "FEATURE_LEVEL", Params: map[string]string{"LEVEL": strconv.Itoa(store.LevelDraftTests), "CLUSTER_LEVEL": strconv.Itoa(level)},
					Message: fmt.Sprintf("rule tests attached to the draft need feature level %d on every master (the cluster is at %d): upgrade them all; nothing was changed", store.LevelDraftTests, level)}
			}
			return fn(w, r)
		}))
	}
	h("GET "+DraftTestsPath, auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) {
		d, err := a.testsDraft(ts, r, auth.View)
		if err != nil {
			return nil, err
		}
		return testsView(d)
	})
	h("PUT "+DraftTestsPath, auth.Edit, func(w http.ResponseWriter, r *http.Request) (any, error) { return a.putDraftTests(ts, w, r) })
	h("POST "+DraftTestsPath+"/run", auth.View, func(w http.ResponseWriter, r *http.Request) (any, error) {
		d, err := a.testsDraft(ts, r, auth.View)
		if err != nil {
			return nil, err
		}
		return a.runTests(d)
	})
	return a.withNoRoute(mux)
}

// testsDraft returns the draft a tests request is about, checking the
// draft query parameter and that the caller may read it (decision 8: a
// displaced user may not).
func (a *API) testsDraft(ts DraftTestsStore, r *http.Request, perm auth.Permission) (*store.Draft, error) {
	s, err := a.scope(r, perm)
	if err != nil {
		return nil, err
	}
	d, err := ts.DraftView()
	if err != nil {
		return nil, err
	}
	if id := r.URL.Query().Get("draft"); id != "" && id != d.ID {
		return nil, draftNotFound(id)
	}
	if s.User != d.Owner && slices.Contains(d.Displaced, s.User) {
		return nil, &store.NotOwnerError{DraftID: d.ID, Owner: d.Owner, Displaced: true}
	}
	return d, nil
}

// putDraftTests replaces the draft's tests: the owner's request, with an
// authorization at the root (or admin), since the tests check the whole
// tree and gate every deploy.
func (a *API) putDraftTests(ts DraftTestsStore, w http.ResponseWriter, r *http.Request) (any, error) {
	s, err := a.scope(r, auth.Edit)
	if err != nil {
		return nil, err
	}
	if scope := editScope(s); scope != nil {
		return nil, &Error{Status: http.StatusForbidden, Code: "TESTS_OUT_OF_SCOPE", Params: map[string]string{"SCOPE": config.PathString(scope)},
			Message: fmt.Sprintf("a token scoped to %s does not change the draft's tests, which check the whole tree and gate every deploy: use an authorization at the root or admin; nothing was changed", config.PathString(scope))}
	}
	if ct := r.Header.Get("Content-Type"); !isJSONType(ct) {
		return nil, errorf(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "the body must be sent with Content-Type: application/json (got %q)", ct)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTestsBody)
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	files, err := decodeTestsBody(b)
	if err != nil {
		return nil, err
	}
	a.edits.Lock()
	defer a.edits.Unlock()
	d, err := a.testsDraft(ts, r, auth.Edit)
	if err != nil {
		return nil, err
	}
	if d.Owner != s.User {
		return nil, &store.NotOwnerError{DraftID: d.ID, Owner: d.Owner}
	}
	sess := store.SessionFromContext(r.Context())
	next := *d
	next.Tests = files
	view, err := testsView(&next)
	if err != nil {
		return nil, err
	}
	setAnswer(sess, view)
	if err := ts.SetDraftTests(r.Context(), sess, d.ID, s.User, files); err != nil {
		return nil, err
	}
	return view, nil
}

// decodeTestsBody reads a PUT body strictly: each file's content must
// decode as a test file (a 400 naming the file, the case and the field),
// names must differ, and the whole must be within the store's limits.
// The files are returned sorted by name, their content compact.
func decodeTestsBody(b []byte) ([]store.TestFile, error) {
	if err := checkJSON(b); err != nil {
		return nil, err
	}
	var body DraftTestsBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", `the body is {"files": [{"name": "routing.json", "content": {"cases": [...]}}, ...]}: %v`, err)
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "unexpected data after the JSON body")
	}
	if body.Files == nil {
		return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", `files: missing (send "files": [] to remove every test)`)
	}
	files := make([]store.TestFile, 0, len(body.Files))
	cases := 0
	for i, f := range body.Files {
		bad := func(field string, err error) error {
			return &Error{Status: http.StatusBadRequest, Code: "BAD_TEST_FILE", Params: map[string]string{"FILE": f.Name, "FIELD": field},
				Message: fmt.Sprintf("files[%d]: %v; nothing was changed", i, err)}
		}
		if f.Name == "" {
			return nil, bad("name", errors.New("name: missing"))
		}
		tf, err := ruletest.Decode(f.Name, f.Content)
		if err != nil {
			field := "content"
			if de, ok := errors.AsType[*ruletest.DecodeError](err); ok && de.Field != "" {
				field = de.Field
			}
			return nil, bad(field, err)
		}
		cases += len(tf.Cases)
		var c bytes.Buffer
		if err := json.Compact(&c, f.Content); err != nil {
			return nil, bad("content", err)
		}
		files = append(files, store.TestFile{Name: f.Name, Content: c.Bytes()})
	}
	if cases > maxTestCases {
		return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "the test files hold %d cases, at most %d", cases, maxTestCases)
	}
	slices.SortFunc(files, func(x, y store.TestFile) int { return strings.Compare(x.Name, y.Name) })
	for i := 1; i < len(files); i++ {
		if files[i].Name == files[i-1].Name {
			return nil, &Error{Status: http.StatusBadRequest, Code: "BAD_TEST_FILE", Params: map[string]string{"FILE": files[i].Name, "FIELD": "name"},
				Message: fmt.Sprintf("two test files are named %q; nothing was changed", files[i].Name)}
		}
	}
	if err := store.CheckTestFiles(files); err != nil {
		return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "%v; nothing was changed", err)
	}
	return files, nil
}

// decodeTests decodes a draft's stored test files.
func decodeTests(files []store.TestFile) ([]*ruletest.File, error) {
	out := make([]*ruletest.File, 0, len(files))
	for _, f := range files {
		tf, err := ruletest.Decode(f.Name, f.Content)
		if err != nil {
			return nil, fmt.Errorf("stored test file: %w", err)
		}
		out = append(out, tf)
	}
	return out, nil
}

// testsView is the answer that shows d's tests.
func testsView(d *store.Draft) (DraftTestsView, error) {
	v := DraftTestsView{Draft: d.ID, Owner: d.Owner, Files: []TestFileView{}}
	decoded, err := decodeTests(d.Tests)
	if err != nil {
		return v, err
	}
	if v.Tested, err = store.TestsHash(d.Tests); err != nil {
		return v, err
	}
	for i, tf := range decoded {
		fv := TestFileView{Name: tf.Name, Cases: make([]string, len(tf.Cases)), Content: d.Tests[i].Content}
		for j, c := range tf.Cases {
			fv.Cases[j] = c.Name
		}
		v.Cases += len(tf.Cases)
		v.Files = append(v.Files, fv)
	}
	return v, nil
}

// runTests runs d's tests against d's tree with the engines' compiler.
func (a *API) runTests(d *store.Draft) (*TestRun, error) {
	files, err := decodeTests(d.Tests)
	if err != nil {
		return nil, err
	}
	tested, err := store.TestedOf(d)
	if err != nil {
		return nil, err
	}
	run := &TestRun{Draft: d.ID, Passed: true, Tested: tested, Files: []TestFileResult{}}
	if len(files) == 0 {
		return run, nil
	}
	runner, err := ruletest.New(d.Tree)
	if err != nil {
		if cerr := a.compiles(d.Tree); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	for _, f := range files {
		res := runner.Run(f)
		fr := TestFileResult{File: res.File, Cases: make([]TestCaseResult, 0, len(res.Cases))}
		for _, c := range res.Cases {
			cr := TestCaseResult{Name: c.Name, Passed: c.Passed()}
			for _, fl := range c.Failures {
				cr.Failures = append(cr.Failures, TestFailure{Rule: fl.Rule, Expectation: fl.Expectation, Expected: fl.Expected, Got: fl.Got, Text: fl.String()})
			}
			run.Cases++
			if !cr.Passed {
				run.Failed++
				run.Passed = false
			}
			fr.Cases = append(fr.Cases, cr)
		}
		run.Files = append(run.Files, fr)
	}
	return run, nil
}

// maxFailureLines bounds the failures a TESTS_FAILED message lists (the
// details hold them all).
const maxFailureLines = 10

// testsFailed is the answer to a deploy whose tests failed: 422
// TESTS_FAILED, the failures in the message (the first few) and in the
// details (all).
func testsFailed(run *TestRun) *Error {
	var lines []string
	for _, f := range run.Files {
		for _, c := range f.Cases {
			for _, fl := range c.Failures {
				if len(lines) < maxFailureLines {
					lines = append(lines, fmt.Sprintf("%s: %s: %s", f.File, c.Name, fl.Text))
				}
			}
		}
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "TESTS_FAILED",
		Params:  map[string]string{"FAILED": strconv.Itoa(run.Failed), "CASES": strconv.Itoa(run.Cases)},
		Message: fmt.Sprintf("%d of the draft's %d test cases failed; nothing was deployed:\n%s", run.Failed, run.Cases, strings.Join(lines, "\n")),
		Details: run}
}

// testsError maps the draft tests' store errors to answers, or nil.
func testsError(err error) *Error {
	switch {
	case errors.Is(err, store.ErrDraftChanged):
		return &Error{Status: http.StatusConflict, Code: "DRAFT_CHANGED",
			Message: "the draft or its tests changed after the tests ran, before the deploy was applied: deploy again to test the draft as it is now; nothing was deployed"}
	case errors.Is(err, store.ErrTestsNotRun):
		return &Error{Status: http.StatusConflict, Code: "TESTS_NOT_RUN", Message: err.Error() + "; nothing was deployed"}
	}
	return nil
}
