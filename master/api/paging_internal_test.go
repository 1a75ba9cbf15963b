package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/store"
)

// pageCase is a query of a paged list and the answer it gets.
type pageCase struct {
	query  string
	status int
	body   string
}

// checkPages checks the status and body the API writes for the result of
// list for each case's query of path.
func checkPages(t *testing.T, path string, list func(r *http.Request) (any, error), cases []pageCase) {
	t.Helper()
	for _, tc := range cases {
		r := httptest.NewRequest("GET", path+tc.query, nil)
		w := httptest.NewRecorder()
		if v, err := list(r); err != nil {
			New(Config{}, nil, nil, nil, nil).writeError(w, r, err)
		} else {
			writeJSON(w, http.StatusOK, v)
		}
		if body := strings.TrimSpace(w.Body.String()); w.Code != tc.status || body != tc.body {
			t.Errorf("%q: %d %s\nwant %d %s", tc.query, w.Code, body, tc.status, tc.body)
		}
	}
}

// queryEcho answers every audit query with one record that tells what it
// was asked: Seq is the query's limit, Index its before.
type queryEcho struct{}

func (queryEcho) Audit(q store.AuditQuery) ([]audit.Record, uint64, error) {
	return []audit.Record{{Seq: uint64(q.Limit), Index: q.Before}}, 0, nil
}

// TestListAudit_paging: the audit list's limit (default 100, 1 to 1000)
// and before (a record's sequence number: positive) parameters, and the
// answers to bad values.
func TestListAudit_paging(t *testing.T) {
	t.Parallel()
	asked := func(limit, before int) string {
		return fmt.Sprintf(`{"records":[{"seq":%d,"time_ms":0,"index":%d,"action":"","result":"","prev":"","hash":""}]}`, limit, before)
	}
	checkPages(t, AuditPath, func(r *http.Request) (any, error) { return listAudit(queryEcho{}, r) }, []pageCase{
		{"", 200, asked(100, 0)},
		{"?limit=1000&before=4", 200, asked(1000, 4)},
		{"?limit=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"0\" is not an integer between 1 and 1000"}`},
		{"?limit=1001", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"1001\" is not an integer between 1 and 1000"}`},
		{"?limit=x", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"x\" is not an integer between 1 and 1000"}`},
		{"?before=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"0\" is not a record's sequence number (a positive integer)"}`},
		{"?before=-1", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"-1\" is not a record's sequence number (a positive integer)"}`},
	})
}

// versionList holds versions 1 to n, oldest first; it has none of the
// other methods of Versions.
type versionList struct {
	noVersions
	n uint64
}

type noVersions = Versions

func (l versionList) Versions() []store.Version {
	var out []store.Version
	for i := range l.n {
		out = append(out, store.Version{Number: i + 1})
	}
	return out
}

// TestListVersions_paging: the versions list's limit (default 50, 1 to
// 1000) and before (a version number; 0 is none, as when absent)
// parameters, and the answers to bad values.
func TestListVersions_paging(t *testing.T) {
	t.Parallel()
	v := func(n int) string {
		return fmt.Sprintf(`{"number":%d,"index":0,"author":"","time_ms":0,"hash":"","nodes":0,"rules":0}`, n)
	}
	all := `{"versions":[` + v(1) + `,` + v(2) + `,` + v(3) + `]}`
	checkPages(t, VersionsPath, func(r *http.Request) (any, error) { return listVersions(versionList{n: 3}, r) }, []pageCase{
		{"", 200, all},
		{"?before=0", 200, all},
		{"?limit=1000&before=0", 200, all},
		{"?limit=2", 200, `{"versions":[` + v(1) + `,` + v(2) + `],"next_before":2}`},
		{"?before=3", 200, `{"versions":[` + v(1) + `,` + v(2) + `]}`},
		{"?limit=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"0\" is not an integer between 1 and 1000"}`},
		{"?limit=1001", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"1001\" is not an integer between 1 and 1000"}`},
		{"?before=x", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"x\" is not a version number"}`},
	})
}
