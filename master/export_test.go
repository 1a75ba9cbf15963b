package master

import (
	"context"
	"net/http"
)

// WriteLeaderError answers r as a request whose wait for a leader ended
// is answered (router.giveUp), with this node's view of the leader.
func (s *Server) WriteLeaderError(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.writeError(w, r, s.leaderError(ctx, r, ctx.Err()))
}
