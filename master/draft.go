package master

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// DraftInfo is the answer of GET /squall/v1/draft: the one draft's id, its
// owner and its times (Unix milliseconds), without its tree. The
// configuration API lists the draft's id but not who holds it; a client
// about to create a draft (which replaces the existing one) reads this to
// tell its user whose draft it would replace.
type DraftInfo struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	CreatedMS int64  `json:"created_ms"`
	UpdatedMS int64  `json:"updated_ms"`
}

// handleDraft answers the draft's [DraftInfo], or null when there is none
// (on the leader). Token: view on any authorization: whoever may list the
// draft may know who holds it, as a refused edit (NOT_OWNER) tells anyway.
func (s *Server) handleDraft(w http.ResponseWriter, r *http.Request) error {
	c, err := s.tokens.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	viewer := false
	for _, a := range c.Auths {
		viewer = viewer || a.Grants(auth.View)
	}
	if !viewer {
		return fmt.Errorf("%w: the token has no authorization that grants %s", auth.ErrForbidden, auth.View)
	}
	d, err := s.store.Draft()
	if errors.Is(err, store.ErrNoDraft) {
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DraftInfo{ID: d.ID, Owner: d.Owner, CreatedMS: d.CreatedMS, UpdatedMS: d.UpdatedMS})
	return nil
}
