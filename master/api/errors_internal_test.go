package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/squallhq/squall/master/store"
)

// TestToError_LeadershipLost: see the findings API's test of the same
// name: a command that lost its leader before it committed answers
// LEADER_LOST (it may still commit); a node that did not lead, NO_LEADER.
func TestToError_LeadershipLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("apply deploy: %w", &store.NotLeaderError{Err: store.ErrLeadershipLost}), "LEADER_LOST"},
		{&store.NotLeaderError{LeaderID: "m3"}, "NO_LEADER"},
		{store.ErrTimeout, "NO_LEADER"},
	} {
		e := toError(tc.err)
		if e.Status != http.StatusServiceUnavailable || e.Code != tc.code || e.RetryAfter == 0 {
			t.Errorf("%v: %d %s (Retry-After %d), want 503 %s", tc.err, e.Status, e.Code, e.RetryAfter, tc.code)
		}
	}
}
