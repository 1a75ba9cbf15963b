package findings

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/squallhq/squall/master/store"
)

// TestToError_LeadershipLost: a command proposed by a leader that lost
// its leadership before it committed may still commit: LEADER_LOST, as a
// follower answers when its leader failed with the request; a node that
// knew it did not lead answers NO_LEADER (nothing was proposed).
func TestToError_LeadershipLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&store.NotLeaderError{Err: store.ErrLeadershipLost}, "LEADER_LOST"},
		{fmt.Errorf("apply patch_finding: %w", &store.NotLeaderError{LeaderID: "m3", Err: store.ErrLeadershipLost}), "LEADER_LOST"},
		{&store.NotLeaderError{LeaderID: "m3"}, "NO_LEADER"},
		{store.ErrTimeout, "NO_LEADER"},
	} {
		e := toError(tc.err)
		if e.Status != http.StatusServiceUnavailable || e.Code != tc.code || e.RetryAfter == 0 {
			t.Errorf("%v: %d %s (Retry-After %d), want 503 %s", tc.err, e.Status, e.Code, e.RetryAfter, tc.code)
		}
	}
}
