package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/store"
)

// answer is the status and body the API writes for a list function's
// result.
func answer(list func(r *http.Request) (any, error), target string) (int, string) {
	r := httptest.NewRequest("GET", target, nil)
	w := httptest.NewRecorder()
	if v, err := list(r); err != nil {
		New(Config{}, nil, nil, nil, nil).writeError(w, r, err)
	} else {
		writeJSON(w, http.StatusOK, v)
	}
	return w.Code, strings.TrimSpace(w.Body.String())
}

// auditLog answers every query with its records and remembers the query.
type auditLog struct {
	recs []audit.Record
	q    store.AuditQuery
}

func (l *auditLog) Audit(q store.AuditQuery) ([]audit.Record, uint64, error) {
	l.q = q
	return l.recs, 0, nil
}

// TestListAudit_paging: the audit list's limit (default 100, 1 to 1000)
// and before (a record's sequence number: positive) parameters, and the
// answers to bad values.
func TestListAudit_paging(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query         string
		status        int
		body          string
		limit, before uint64
	}{
		{"", 200, `{"records":[{"seq":3,"time_ms":0,"index":0,"action":"","result":"","prev":"","hash":""}]}`, 100, 0},
		{"?limit=1000&before=4", 200, `{"records":[{"seq":3,"time_ms":0,"index":0,"action":"","result":"","prev":"","hash":""}]}`, 1000, 4},
		{"?limit=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"0\" is not an integer between 1 and 1000"}`, 0, 0},
		{"?limit=1001", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"1001\" is not an integer between 1 and 1000"}`, 0, 0},
		{"?limit=x", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"x\" is not an integer between 1 and 1000"}`, 0, 0},
		{"?before=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"0\" is not a record's sequence number (a positive integer)"}`, 0, 0},
		{"?before=-1", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"-1\" is not a record's sequence number (a positive integer)"}`, 0, 0},
	} {
		log := &auditLog{recs: []audit.Record{{Seq: 3}}}
		status, body := answer(func(r *http.Request) (any, error) { return listAudit(log, r) }, AuditPath+tc.query)
		if status != tc.status || body != tc.body {
			t.Errorf("%q: %d %s\nwant %d %s", tc.query, status, body, tc.status, tc.body)
		}
		if status == 200 && (uint64(log.q.Limit) != tc.limit || log.q.Before != tc.before) {
			t.Errorf("%q: queried limit %d before %d, want %d %d", tc.query, log.q.Limit, log.q.Before, tc.limit, tc.before)
		}
	}
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
		return `{"number":` + string(rune('0'+n)) + `,"index":0,"author":"","time_ms":0,"hash":"","nodes":0,"rules":0}`
	}
	all := `{"versions":[` + v(1) + `,` + v(2) + `,` + v(3) + `]}`
	for _, tc := range []struct {
		query  string
		status int
		body   string
	}{
		{"", 200, all},
		{"?before=0", 200, all},
		{"?limit=1000&before=0", 200, all},
		{"?limit=2", 200, `{"versions":[` + v(1) + `,` + v(2) + `],"next_before":2}`},
		{"?before=3", 200, `{"versions":[` + v(1) + `,` + v(2) + `]}`},
		{"?limit=0", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"0\" is not an integer between 1 and 1000"}`},
		{"?limit=1001", 400, `{"code":"BAD_REQUEST","params":{},"message":"limit \"1001\" is not an integer between 1 and 1000"}`},
		{"?before=x", 400, `{"code":"BAD_REQUEST","params":{},"message":"before \"x\" is not a version number"}`},
	} {
		status, body := answer(func(r *http.Request) (any, error) { return listVersions(versionList{n: 3}, r) }, VersionsPath+tc.query)
		if status != tc.status || body != tc.body {
			t.Errorf("%q: %d %s\nwant %d %s", tc.query, status, body, tc.status, tc.body)
		}
	}
}
