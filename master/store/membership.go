package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// catchUpPoll is how often Join asks a new member how far its log is.
const catchUpPoll = 25 * time.Millisecond

// Join makes node id, reachable for raft at raftAddr, a voting member,
// and records httpAddr as its HTTP address (unless httpAddr is empty).
// Only the leader can; others return a *NotLeaderError. The steps, each of
// which must succeed before the next changes anything:
//
//  1. raftAddr is dialled as raft would, the TLS handshake included; with
//     raft TLS the certificate it presents must name id (its common name
//     or a DNS name), else ErrIdentity.
//  2. A raft heartbeat is sent to raftAddr: only a node that answers it
//     as raft does goes on (else ErrUnreachable). A plain TCP listener
//     never does.
//  3. A new member enters as a non-voter and is promoted to voter once its
//     log has caught up with the leader's (Config.CatchUpTimeout), so it
//     never counts in the quorum before it can vote; its HTTP address is
//     recorded just before the promotion. A member that fails is removed
//     again and its HTTP address left as it was.
//  4. A member that moved (a known id, a new raft address) answered the
//     heartbeat at its new address; only then does its address change,
//     then its HTTP address.
//
// A failed join leaves the raft configuration and the HTTP addresses as
// they were. Joining a member again as it is changes nothing. A different
// member recorded at raftAddr (a node that came back under a new id) is
// removed once the joining node answered there.
//
// The member advertises no feature level: see JoinLevel.
func (s *Store) Join(ctx context.Context, id, raftAddr, httpAddr string) error {
	return s.JoinLevel(ctx, id, raftAddr, httpAddr, 0)
}

// JoinLevel is Join for a member that advertises feature level level
// (see [FeatureLevel]), recorded with its HTTP address (so not when
// httpAddr is empty). Joining again as it is, with another level,
// records the new level.
func (s *Store) JoinLevel(ctx context.Context, id, raftAddr, httpAddr string, level int) error {
	r, err := s.leaderNode()
	if err != nil {
		return err
	}
	if id == "" || raftAddr == "" {
		return fmt.Errorf("join: %w: a node id and an address are required", ErrInvalidCommand)
	}
	if raftAddr == s.Addr() && id != s.cfg.NodeID {
		return fmt.Errorf("join %s: %w: %s is this node's own address", id, ErrInvalidCommand, raftAddr)
	}
	servers, err := s.servers(ctx, r)
	if err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	var prior *raft.Server
	for _, srv := range servers {
		if srv.ID == raft.ServerID(id) {
			prior = &srv
		}
	}
	sameRaft := prior != nil && prior.Address == raft.ServerAddress(raftAddr) && prior.Suffrage == raft.Voter
	if sameRaft && (httpAddr == "" || s.HTTPAddr(id) == httpAddr && s.MemberLevel(id) == max(level, 0)) {
		return nil
	}
	if id == s.cfg.NodeID {
		// The leader itself: its own raft address is known without a
		// heartbeat (it may have changed since the configuration was
		// written, e.g. a single node restarted on another port).
		if raftAddr != s.Addr() {
			return fmt.Errorf("join %s: %w: the leader's own raft address is %s", id, ErrInvalidCommand, s.Addr())
		}
		if !sameRaft {
			d, err := timeout(ctx, s.cfg.ApplyTimeout)
			if err != nil {
				return fmt.Errorf("join %s: %w", id, err)
			}
			if err := s.await(ctx, r.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, d)); err != nil {
				return fmt.Errorf("join %s: %w", id, raftError(r, err))
			}
		}
		return s.setHTTPAddr(ctx, id, httpAddr, level)
	}
	if err := s.verifyPeer(ctx, r, id, raftAddr); err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	if sameRaft {
		// Only the HTTP address changes; the member answered as raft at
		// its recorded address.
		return s.setHTTPAddr(ctx, id, httpAddr, level)
	}
	d, err := timeout(ctx, s.cfg.ApplyTimeout)
	if err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	for _, srv := range servers {
		if srv.Address == raft.ServerAddress(raftAddr) && srv.ID != raft.ServerID(id) {
			s.logger.Info("removing member with the joining node's address", "member", srv.ID, "addr", raftAddr)
			if err := s.await(ctx, r.RemoveServer(srv.ID, 0, d)); err != nil {
				return fmt.Errorf("join %s: remove %s: %w", id, srv.ID, raftError(r, err))
			}
		}
	}
	if prior != nil && prior.Suffrage == raft.Voter {
		// A voter that moved: it answered raft at its new address.
		if err := s.await(ctx, r.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, d)); err != nil {
			return fmt.Errorf("join %s: %w", id, raftError(r, err))
		}
		s.logger.Info("member moved", "member", id, "from", prior.Address, "addr", raftAddr)
		return s.setHTTPAddr(ctx, id, httpAddr, level)
	}
	return s.addMember(ctx, r, prior, id, raftAddr, httpAddr, level)
}

// addMember adds id as a non-voter, waits until it caught up, records its
// HTTP address and promotes it. On failure it restores prior (nil: no
// such member) and the HTTP address it had.
func (s *Store) addMember(ctx context.Context, r *raft.Raft, prior *raft.Server, id, raftAddr, httpAddr string, level int) (err error) {
	d, err := timeout(ctx, s.cfg.ApplyTimeout)
	if err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	oldHTTP, oldLevel := s.HTTPAddr(id), s.MemberLevel(id)
	f := r.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, d)
	if err := s.await(ctx, f); err != nil {
		return fmt.Errorf("join %s: add non-voter: %w", id, raftError(r, err))
	}
	target := f.Index()
	s.logger.Info("added non-voter", "member", id, "addr", raftAddr, "index", target)
	defer func() {
		if err != nil {
			s.undoJoin(context.WithoutCancel(ctx), r, prior, id, oldHTTP, oldLevel)
		}
	}()
	start := time.Now()
	if err := s.catchUp(ctx, r, id, raftAddr, target); err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	if err := s.setHTTPAddr(ctx, id, httpAddr, level); err != nil {
		return err
	}
	if err := s.await(ctx, r.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, d)); err != nil {
		return fmt.Errorf("join %s: promote to voter: %w", id, raftError(r, err))
	}
	s.logger.Info("promoted to voter", "member", id, "addr", raftAddr, "catch_up", time.Since(start))
	return nil
}

// undoJoin puts back the member as it was before a failed addMember.
func (s *Store) undoJoin(ctx context.Context, r *raft.Raft, prior *raft.Server, id, oldHTTP string, oldLevel int) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	var f raft.IndexFuture
	if prior == nil {
		f = r.RemoveServer(raft.ServerID(id), 0, s.cfg.ApplyTimeout)
	} else {
		f = r.AddNonvoter(prior.ID, prior.Address, 0, s.cfg.ApplyTimeout)
	}
	if err := s.await(ctx, f); err != nil {
		s.logger.Warn("failed join not undone", "member", id, "error", raftError(r, err))
	}
	if s.HTTPAddr(id) == oldHTTP && s.MemberLevel(id) == oldLevel {
		return
	}
	var err error
	if oldHTTP == "" {
		_, err = s.Apply(ctx, nil, DeleteMember{ID: id})
	} else {
		_, err = s.Apply(ctx, nil, SetMember{ID: id, HTTPAddr: oldHTTP, FeatureLevel: oldLevel})
	}
	if err != nil {
		s.logger.Warn("HTTP address of a failed join not restored", "member", id, "error", err)
	}
}

// setHTTPAddr records member id's HTTP address and feature level; an
// empty address changes nothing.
func (s *Store) setHTTPAddr(ctx context.Context, id, httpAddr string, level int) error {
	if httpAddr == "" {
		return nil
	}
	if err := s.SetMemberLevel(ctx, id, httpAddr, level); err != nil {
		return fmt.Errorf("join %s: record http address: %w", id, err)
	}
	return nil
}

// verifyPeer checks that addr is node id speaking raft: the dial (with
// its certificate naming id under TLS), then one heartbeat answered.
func (s *Store) verifyPeer(ctx context.Context, r *raft.Raft, id, addr string) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.TransportTimeout)
	err := s.streamLayer().probe(pctx, id, addr)
	cancel()
	if errors.Is(err, ErrIdentity) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrUnreachable, addr, err)
	}
	if _, err := s.ping(r, id, addr); err != nil {
		return fmt.Errorf("%w %s: no raft answer: %w", ErrUnreachable, addr, err)
	}
	return nil
}

// catchUp waits until node id's log reaches index target, asking it with
// heartbeats, within Config.CatchUpTimeout.
func (s *Store) catchUp(ctx context.Context, r *raft.Raft, id, addr string, target uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CatchUpTimeout)
	defer cancel()
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	var (
		last    uint64
		lastErr error
	)
	for {
		n, err := s.ping(r, id, addr)
		if err == nil && n >= target {
			return nil
		}
		if err == nil {
			last = n
		}
		lastErr = err
		select {
		case <-tick.C:
		case <-s.stop:
			return ErrClosed
		case <-ctx.Done():
			if _, err := s.leaderNode(); err != nil {
				return err
			}
			return fmt.Errorf("%w %s: not caught up (log at %d of %d, last error %v): %w", ErrUnreachable, addr, last, target, lastErr, ctx.Err())
		}
	}
}

// ping sends node id at addr one raft heartbeat as this leader and
// returns the last log index the node reports. It is the heartbeat raft
// itself sends (no entries, no commit index), so it changes nothing on a
// node that follows this leader. It fails when the node does not answer
// as raft does within Config.TransportTimeout, or refuses this leader.
func (s *Store) ping(r *raft.Raft, id, addr string) (uint64, error) {
	s.mu.Lock()
	trans, stream := s.trans, s.stream
	s.mu.Unlock()
	if trans == nil || stream == nil {
		return 0, ErrNotOpen
	}
	self := trans.EncodePeer(raft.ServerID(s.cfg.NodeID), trans.LocalAddr())
	req := raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: s.rconf.ProtocolVersion, ID: []byte(s.cfg.NodeID), Addr: self},
		Term:      r.CurrentTerm(),
	}
	var resp raft.AppendEntriesResponse
	stream.expect(raft.ServerAddress(addr), raft.ServerID(id))
	if err := trans.AppendEntries(raft.ServerID(id), raft.ServerAddress(addr), &req, &resp); err != nil {
		return 0, err
	}
	if !resp.Success {
		return 0, fmt.Errorf("heartbeat refused at term %d (ours %d)", resp.Term, req.Term)
	}
	return resp.LastLog, nil
}

// namesNode reports whether the leaf certificate names node id, as its
// common name or one of its DNS names.
func namesNode(certs []*x509.Certificate, id string) bool {
	if len(certs) == 0 {
		return false
	}
	leaf := certs[0]
	return leaf.Subject.CommonName == id || slices.Contains(leaf.DNSNames, id)
}

// checkIdentity returns ErrIdentity unless the TLS connection's peer
// certificate names node id. A plain TCP connection has nothing to check.
func checkIdentity(c any, id string) error {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	certs := tc.ConnectionState().PeerCertificates
	if namesNode(certs, id) {
		return nil
	}
	name := ""
	if len(certs) > 0 {
		name = certs[0].Subject.CommonName
	}
	return fmt.Errorf("%w: node %q presents a certificate for %q", ErrIdentity, id, name)
}

// HasState reports whether dataDir holds raft state (a log, a term or a
// snapshot): the node was a member before and restarts with its state.
// It opens and closes the raft log, so the store must not be open.
func HasState(dataDir string) (bool, error) {
	path := filepath.Join(dataDir, raftDBName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("raft state: %w", err)
	}
	logs, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if err != nil {
		return false, fmt.Errorf("raft state: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStore(dataDir, 1, io.Discard)
	if err != nil {
		return false, errors.Join(fmt.Errorf("raft state: %w", err), logs.Close())
	}
	has, err := raft.HasExistingState(logs, logs, snaps)
	if cerr := logs.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("raft state: %w", err)
	}
	return has, nil
}
