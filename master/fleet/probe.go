package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxProbeAnswer bounds what is read of a master's answer.
const maxProbeAnswer = 1 << 20

// clusterInfo is the part of a master's GET /squall/v1/cluster that the
// list shows.
type clusterInfo struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	Version      string `json:"version"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

// probeMaster fills m with what the master at m.HTTPAddr says about
// itself: /readyz (no token) gives its health and, when not ready, the
// reason; /squall/v1/cluster (with authorization) its version, raft state,
// term and indexes. Each master answers for itself, so a lagging follower
// shows its own applied index, not the leader's. Both requests share
// Config.ProbeTimeout; a master that does not answer is unreachable.
func (f *Fleet) probeMaster(ctx context.Context, m *Member, authorization string) {
	if m.HTTPAddr == "" {
		m.Health = HealthUnreachable
		m.Reasons = []string{"no HTTP address recorded for this master yet"}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ProbeTimeout)
	defer cancel()
	base := "http://" + m.HTTPAddr
	code, body, err := f.get(ctx, base+"/readyz", "")
	switch {
	case err != nil:
		m.Health = HealthUnreachable
		m.Reasons = []string{err.Error()}
		return
	case code == http.StatusOK:
		m.Health, m.Ready = HealthReady, true
	default:
		m.Health = HealthNotReady
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			e.Message = fmt.Sprintf("/readyz answered %d", code)
		}
		m.Reasons = []string{e.Message}
	}
	if authorization == "" {
		return
	}
	code, body, err = f.get(ctx, base+"/squall/v1/cluster", authorization)
	var info clusterInfo
	switch {
	case err != nil:
		m.Reasons = append(m.Reasons, "cluster view: "+err.Error())
		return
	case code != http.StatusOK:
		m.Reasons = append(m.Reasons, fmt.Sprintf("cluster view: answered %d", code))
		return
	case json.Unmarshal(body, &info) != nil:
		m.Reasons = append(m.Reasons, "cluster view: not JSON")
		return
	case info.NodeID != m.ID:
		// Another node answers at the recorded address (moved, or a
		// stale record): its values are not this member's.
		m.Reasons = append(m.Reasons, fmt.Sprintf("%s answers as node %q", m.HTTPAddr, info.NodeID))
		return
	}
	m.Version, m.State = info.Version, info.State
	m.Term, m.CommitIndex, m.AppliedIndex = &info.Term, &info.CommitIndex, &info.AppliedIndex
}

// get sends a GET and returns the status and the (bounded) body.
func (f *Fleet) get(ctx context.Context, url, authorization string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeAnswer))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}
