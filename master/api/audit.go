package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// AuditPath is the audit log's route (docs/api.md, "Audit log";
// docs/decisions.md decision 61):
//
//	GET /squall/v1/audit   records, newest first, paged (admin on the root)
//
// Query parameters: user, action (exact), since and until (RFC 3339;
// until exclusive), before (a sequence number: the records older than
// it, for the next page), limit (1 to 1000, default 100).
const AuditPath = "/squall/v1/audit"

// AuditLog is what the audit API needs of the store. *store.Store
// implements it.
type AuditLog interface {
	Audit(q store.AuditQuery) ([]audit.Record, uint64, error)
}

var _ AuditLog = (*store.Store)(nil)

// The paging bounds of the audit list.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// AuditList is the answer of GET /squall/v1/audit: a page of records,
// newest first, and the before parameter of the next page (0: none).
type AuditList struct {
	Records    []audit.Record `json:"records"`
	NextBefore uint64         `json:"next_before,omitempty"`
}

// AuditHandler returns the audit API's route, to mount at AuditPath.
// Only a token with admin on the root reads it: the records name every
// user and every tenant's findings.
func (a *API) AuditHandler(log AuditLog) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+AuditPath, func(w http.ResponseWriter, r *http.Request) {
		claims, err := a.tokens.Verify(r.Header.Get("Authorization"))
		if err == nil {
			err = claims.OnRoot(auth.Admin)
		}
		var res any
		if err == nil {
			res, err = listAudit(log, r)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	return a.withNoRoute(mux)
}

func listAudit(log AuditLog, r *http.Request) (*AuditList, error) {
	qv := r.URL.Query()
	limit, err := pageLimit(qv, defaultAuditLimit, maxAuditLimit)
	if err != nil {
		return nil, err
	}
	q := store.AuditQuery{User: qv.Get("user"), Action: qv.Get("action"), Limit: limit}
	if v := qv.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "before %q is not a record's sequence number (a positive integer)", v)
		}
		q.Before = n
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		v := qv.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "BAD_REQUEST", "%s %q is not an RFC 3339 time (e.g. 2026-11-29T10:00:00Z)", p.name, v)
		}
		*p.dst = t
	}
	recs, next, err := log.Audit(q)
	if err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	return &AuditList{Records: recs, NextBefore: next}, nil
}
