package master

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/store"
)

// ClusterInfo is the answer of GET /squall/v1/cluster: the answering
// node's view of the cluster.
type ClusterInfo struct {
	// NodeID is the answering node; State its raft state (Leader,
	// Follower, Candidate).
	NodeID string `json:"node_id"`
	State  string `json:"state"`
	// Version describes the answering node's binary (Config.Version).
	Version string `json:"version"`
	// LeaderID is the leader this node knows, "" during an election.
	LeaderID string `json:"leader_id"`
	Term     uint64 `json:"term"`
	// CommitIndex is the highest raft log index this node knows to be
	// committed; AppliedIndex the highest it applied to its state.
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// StateIndex and ActiveIndex are the indexes of the last change of
	// the state and of the active tree.
	StateIndex  uint64 `json:"state_index"`
	ActiveIndex uint64 `json:"active_index"`
	// Members are the raft configuration's servers, sorted by id.
	Members []MemberInfo `json:"members"`
	// FeatureLevel is the cluster's level of log entry forms, the lowest
	// its members advertise: the leader writes request ids and binary
	// finding entries from level 1 on, once every member runs a binary
	// that applies them (store.FeatureLevel; docs/decisions.md decision 40).
	FeatureLevel int `json:"feature_level"`
}

// MemberInfo is one member of the cluster.
type MemberInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	// HTTPAddr is empty until the member registered it.
	HTTPAddr string `json:"http_addr"`
	// Suffrage is "voter" or "nonvoter".
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// FeatureLevel is the level the member advertised when it registered
	// (0: none, as a master without levels registers).
	FeatureLevel int `json:"feature_level"`
}

// JoinRequest is the body of POST /squall/v1/cluster/join: the node that
// asks to be added as a voter.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// HeaderJoinToken carries the join secret of POST /squall/v1/cluster/join.
const HeaderJoinToken = "X-Squall-Join-Token"

// HeaderFeatureLevel carries, on POST /squall/v1/cluster/join, the
// feature level of the joining node's binary (store.FeatureLevel): a
// header, not a field of the body, since masters without levels refuse
// unknown fields and ignore unknown headers. Absent: level 0.
const HeaderFeatureLevel = "X-Squall-Feature-Level"

// maxJoinBody bounds join request bodies; maxRestoreBody backup files.
const (
	maxJoinBody    = 64 << 10
	maxRestoreBody = 4 << 30
)

// FleetMasters lists the cluster's members as the fleet list shows them
// (the masters fleet.New reports on).
func (s *Server) FleetMasters(ctx context.Context) ([]fleet.Master, error) {
	st, err := s.Store().Stats(ctx)
	if err != nil {
		return nil, err
	}
	ms := make([]fleet.Master, 0, len(st.Members))
	for _, m := range st.Members {
		ms = append(ms, fleet.Master{ID: m.ID, RaftAddr: m.Addr, HTTPAddr: m.HTTPAddr, Voter: m.Voter, Leader: m.Leader})
	}
	return ms, nil
}

// authorize authenticates the request's bearer token, checks that one of
// its authorizations is on the whole tree (path ["root"]) and grants p,
// and returns its claims.
func (s *Server) authorize(r *http.Request, p auth.Permission) (*auth.Claims, error) {
	c, err := s.tokens.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	if err := c.OnRoot(p); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// handleReady answers 200 when the store is ready (it knows a leader and
// has applied the log, Store.Ready) and every added ready check passes.
// A not-ready answer is not logged at info: probes ask every few seconds
// while a node starts, and the node logs its own changes of state.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	notReady := func(e *apiError) error {
		if e.Params == nil {
			e.Params = map[string]string{}
		}
		e.RetryAfter = 1
		w.Header().Set("Retry-After", "1")
		s.metrics.unavailable.WithLabelValues(e.Code).Inc()
		s.logger.Debug("not ready", keyPath, r.URL.Path, keyError, e.Message)
		writeJSON(w, http.StatusServiceUnavailable, e)
		return nil
	}
	if !s.store.Ready() {
		return notReady(errorf(http.StatusServiceUnavailable, codeNotReady, "node %s is not ready: no leader known, or the log is not applied yet", s.cfg.NodeID))
	}
	for _, c := range s.readyChecks {
		if err := c.check(); err != nil {
			e := errorf(http.StatusServiceUnavailable, codeNotReady, "node %s is not ready: %s: %s", s.cfg.NodeID, c.name, err)
			e.Params = map[string]string{"CHECK": c.name}
			return notReady(e)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// handleCluster answers this node's view of the cluster. Token: view on root.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authorize(r, auth.View); err != nil {
		return err
	}
	st, err := s.store.Stats(r.Context())
	if err != nil {
		return err
	}
	info := ClusterInfo{
		NodeID: st.NodeID, State: st.State, Version: s.cfg.Version, LeaderID: st.LeaderID, Term: st.Term,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		StateIndex: st.StateIndex, ActiveIndex: st.ActiveIndex,
		Members: []MemberInfo{}, FeatureLevel: st.FeatureLevel,
	}
	for _, m := range st.Members {
		suffrage := "voter"
		if !m.Voter {
			suffrage = "nonvoter"
		}
		info.Members = append(info.Members, MemberInfo{ID: m.ID, RaftAddr: m.Addr, HTTPAddr: m.HTTPAddr, Suffrage: suffrage, Leader: m.Leader,
			FeatureLevel: m.FeatureLevel})
	}
	slices.SortFunc(info.Members, func(a, b MemberInfo) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, info)
	return nil
}

// handleRemove removes a member (on the leader). Token: admin on root.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authorize(r, auth.Admin); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := s.store.Remove(r.Context(), id); err != nil {
		return err
	}
	s.logger.Info("member removed", "member", id)
	writeJSON(w, http.StatusOK, nil)
	return nil
}

// joinAuth lets through only join requests that carry the cluster's join
// secret: 401 without the header, 403 with a wrong one, before the body
// is read or the request is forwarded to the leader (which checks again).
func (s *Server) joinAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkJoinSecret(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkJoinSecret compares the request's join secret with this node's in
// constant time.
func (s *Server) checkJoinSecret(r *http.Request) error {
	got := r.Header.Get(HeaderJoinToken)
	if got == "" {
		return errorf(http.StatusUnauthorized, codeUnauthorized, "join: the %s header with the cluster's join secret is required", HeaderJoinToken)
	}
	sum := sha256.Sum256([]byte(got))
	js := s.joinSecret.Load()
	if js == nil || subtle.ConstantTimeCompare(sum[:], js.sum[:]) != 1 {
		return errorf(http.StatusForbidden, codeForbidden, "join: wrong %s: the joining node's join secret (--join-token-file, SQUALL_JOIN_TOKEN_FILE) differs from the cluster's", HeaderJoinToken)
	}
	return nil
}

// handleJoin makes a node a voter (on the leader), authenticated by
// joinAuth: store.Join adds it as a non-voter, promotes it once it caught
// up, and records its HTTP address only once its raft address answered
// as raft. A join that fails changes nothing.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var req JoinRequest
	if err := decodeBody(w, r, maxJoinBody, &req); err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, codeBadRequest, "join: the node id is empty")
	}
	for _, a := range []struct{ name, v string }{{"raft_addr", req.RaftAddr}, {"http_addr", req.HTTPAddr}} {
		if host, port, err := net.SplitHostPort(a.v); err != nil || host == "" || port == "" || port == "0" {
			return errorf(http.StatusBadRequest, codeBadRequest, "join: %s %q is not host:port", a.name, a.v)
		}
	}
	level := 0
	if v := r.Header.Get(HeaderFeatureLevel); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, codeBadRequest, "join: %s %q is not a level", HeaderFeatureLevel, v)
		}
		level = n
	}
	start := time.Now()
	if err := s.store.JoinLevel(r.Context(), req.ID, req.RaftAddr, req.HTTPAddr, level); err != nil {
		return err
	}
	s.logger.Info("member joined", "member", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr,
		"feature_level", level, keyDuration, time.Since(start))
	writeJSON(w, http.StatusOK, req)
	return nil
}

// handleBackup answers the backup file of the state (on the leader, with
// every acknowledged write), findings included, streamed from one read
// transaction. Token: admin on root.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authorize(r, auth.Admin); err != nil {
		return err
	}
	started := false
	err := s.store.WriteBackup(w, func(b *store.Backup) {
		started = true
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="squall-backup-%d.json"`, b.Index))
		w.WriteHeader(http.StatusOK)
	})
	if err != nil && started {
		// The status is sent: the client sees a truncated file, which
		// does not decode. Log it here, since nobody else can.
		s.logger.Error("backup cut short", "error", err)
		return nil
	}
	return err
}

// RestoreResult is the answer of POST /squall/v1/restore.
type RestoreResult struct {
	// Index is the state index of the restore of the trees, which is also
	// the active tree's new index.
	Index uint64 `json:"index"`
	// Findings is how many findings were restored (0 for a format 1
	// backup, which leaves the findings alone); Duplicates how many of the
	// file's findings were left out as duplicates.
	Findings   int `json:"findings"`
	Duplicates int `json:"duplicates"`
	// Versions is how many versions of the active tree were restored;
	// VersionsSkipped is set when the file holds versions that were left
	// out, a master running a version without them (feature level < 3).
	Versions        int  `json:"versions"`
	VersionsSkipped bool `json:"versions_skipped,omitempty"`
	// IDsSkipped is set when the file's ids of tools and tenants were
	// left out, a master running a release without them (feature level
	// < 6): the cluster numbers its tools and tenants once it has them.
	IDsSkipped bool `json:"ids_skipped,omitempty"`
	// TestsSkipped is set when the file holds rule tests that were left
	// out, a master running a version without them (feature level < 5).
	TestsSkipped bool `json:"tests_skipped,omitempty"`
}

// handleRestore replaces the active tree, the draft and the findings with
// a backup's (on the leader). The whole file is checked before anything
// changes. Token: admin on root.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) error {
	c, err := s.authorize(r, auth.Admin)
	if err != nil {
		return err
	}
	// The audit log records the restore's user (decision 61).
	o := store.OriginFromContext(r.Context())
	o.User = c.User
	r = r.WithContext(store.ContextWithOrigin(r.Context(), o))
	// An admin's backup file may take longer than the body timeout to
	// upload: the deadline is for unauthenticated senders.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	r.Body = http.MaxBytesReader(w, r.Body, maxRestoreBody)
	res, err := s.store.RestoreFrom(r.Context(), r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || errors.Is(err, store.ErrInvalidTree) || !errors.Is(err, store.ErrInvalidBackup) {
			return err
		}
		return errorf(http.StatusBadRequest, codeBadRequest, "%s", err)
	}
	s.logger.Info("state restored from a backup", "index", res.Index, "findings", res.Findings, "duplicates", res.Duplicates,
		"versions", res.Versions, "versions_skipped", res.VersionsSkipped, "ids_skipped", res.IDsSkipped, "tests_skipped", res.TestsSkipped)
	writeJSON(w, http.StatusOK, RestoreResult{Index: res.Index, Findings: res.Findings, Duplicates: res.Duplicates,
		Versions: res.Versions, VersionsSkipped: res.VersionsSkipped, IDsSkipped: res.IDsSkipped, TestsSkipped: res.TestsSkipped})
	return nil
}
