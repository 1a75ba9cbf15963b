package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Ids of tools and tenants (docs/decisions.md decision 63). The findings
// API answers a finding's tool and organization with an integer id each:
// every tool code and every tenant has one, assigned once per cluster in
// the replicated state, so that every master answers the same and a
// restore keeps them.
//
// The state file's bucket "ids" holds two buckets, "tool" (tool code ->
// id) and "tenant" (tenant -> id), each id an uint64 big-endian taken from
// its bucket's sequence (bolt's NextSequence): in log order, the same on
// every node, and carried by snapshots, since they are the state file.
// Ids are never taken back: deleting findings (ClearFindings) keeps them,
// and a tool or tenant that comes back has its id again.
//
// The bucket exists from the AssignIDs entry on, which the leader writes
// once every member applies LevelTypedIDs (Store.assignIDs): applying it
// gives every tenant with findings, then every tool code of a stored
// finding, the next id, each in byte order of the names. From then on
// applying an InsertFindings entry gives the tenant and the tool of each
// finding it stores an id when they have none. Before it no master
// assigns any (those of a lower level could not), and the findings read
// have ids 0 (the API answers null): a cluster that mixes releases keeps
// one state.

// typeAssignIDs is the AssignIDs entry (feature level LevelTypedIDs).
const typeAssignIDs cmdType = 30

// formatIDs is the state file format from which it may hold the ids
// bucket: a binary that reads only older formats refuses such a snapshot
// rather than apply InsertFindings entries without assigning ids.
const formatIDs = 9

// MaxID bounds an id: 2⁵³−1, the largest integer every JSON client
// reads exactly.
const MaxID = 1<<53 - 1

var (
	bucketIDs       = []byte("ids")
	bucketToolIDs   = []byte("tool")
	bucketTenantIDs = []byte("tenant")
)

// IDs maps tool codes and tenants to their ids.
type IDs struct {
	Tools   map[string]int64 `json:"tools"`
	Tenants map[string]int64 `json:"tenants"`
}

// AssignIDs turns on the ids of tools and tenants (written once the
// cluster is at LevelTypedIDs), and gives an id to every tenant with
// findings and every tool code of a stored finding that has none, in
// byte order of the names. With Replace, the ids stored are deleted
// first and IDs (which may be nil) become the ids, as a restore does;
// without it IDs must be nil. Ids that repeat within tools or tenants,
// ids below 1 or above MaxID, and empty names are refused with
// ErrInvalidCommand.
type AssignIDs struct {
	Replace bool
	IDs     *IDs
}

// assignIDsPayload is AssignIDs' payload; the maps are written in key
// order (encoding/json sorts them).
type assignIDsPayload struct {
	Replace bool             `json:"replace,omitempty"`
	Tools   map[string]int64 `json:"tools,omitempty"`
	Tenants map[string]int64 `json:"tenants,omitempty"`
}

func (AssignIDs) cmdType() cmdType { return typeAssignIDs }

func (c AssignIDs) payload() (any, error) {
	p := assignIDsPayload{Replace: c.Replace}
	if c.IDs != nil {
		p.Tools, p.Tenants = c.IDs.Tools, c.IDs.Tenants
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}

// check checks the ids given.
func (p *assignIDsPayload) check() error {
	if !p.Replace && (len(p.Tools) > 0 || len(p.Tenants) > 0) {
		return fmt.Errorf("%w: assign ids: ids are given only with replace", ErrInvalidCommand)
	}
	if err := checkIDs("tool", p.Tools); err != nil {
		return fmt.Errorf("%w: assign ids: %w", ErrInvalidCommand, err)
	}
	if err := checkIDs("tenant", p.Tenants); err != nil {
		return fmt.Errorf("%w: assign ids: %w", ErrInvalidCommand, err)
	}
	return nil
}

// checkIDs checks one kind's ids: names not empty, ids from 1 to MaxID,
// each once.
func checkIDs(kind string, m map[string]int64) error {
	seen := make(map[int64]string, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		id := m[name]
		switch {
		case name == "":
			return fmt.Errorf("a %s with an empty name", kind)
		case id < 1 || id > MaxID:
			return fmt.Errorf("%s %q: id %d is not from 1 to %d", kind, name, id, int64(MaxID))
		case seen[id] != "":
			return fmt.Errorf("%ss %q and %q have the same id %d", kind, seen[id], name, id)
		}
		seen[id] = name
	}
	return nil
}

// idBuckets are the ids bucket's two buckets, nil before AssignIDs.
type idBuckets struct {
	tool, tenant *bolt.Bucket
}

// idBucketsOf returns the ids buckets of tx (nil ones before AssignIDs).
func idBucketsOf(tx *bolt.Tx) (idBuckets, error) {
	root := tx.Bucket(bucketIDs)
	if root == nil {
		return idBuckets{}, nil
	}
	ib := idBuckets{tool: root.Bucket(bucketToolIDs), tenant: root.Bucket(bucketTenantIDs)}
	if ib.tool == nil || ib.tenant == nil {
		return idBuckets{}, errors.New("ids: missing tool or tenant bucket")
	}
	return ib, nil
}

// on reports whether ids are assigned.
func (ib idBuckets) on() bool { return ib.tool != nil }

// getID returns name's id in b: 0 when it has none.
func getID(b *bolt.Bucket, name []byte) int64 {
	v := b.Get(name)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// ensureID gives name the next id of b unless it has one.
func ensureID(b *bolt.Bucket, name []byte) (assigned bool, err error) {
	if b.Get(name) != nil {
		return false, nil
	}
	seq, err := b.NextSequence()
	if err != nil {
		return false, err
	}
	if seq > MaxID {
		return false, fmt.Errorf("ids: %s: out of ids", name)
	}
	return true, putUint64(b, name, seq)
}

// applyAssignIDs applies an AssignIDs entry and reports whether an id was
// stored or deleted (the state changed for readers). refused is a
// refusal; err a failed write.
func applyAssignIDs(tx *bolt.Tx, p *assignIDsPayload) (changed bool, refused, err error) {
	if refused := p.check(); refused != nil {
		return false, refused, nil
	}
	if tx.Bucket(bucketIDs) != nil && p.Replace {
		if err := tx.DeleteBucket(bucketIDs); err != nil {
			return false, nil, err
		}
		changed = true
	}
	root := tx.Bucket(bucketIDs)
	if root == nil {
		var err error
		if root, err = tx.CreateBucket(bucketIDs); err != nil {
			return false, nil, err
		}
		for _, name := range [][]byte{bucketToolIDs, bucketTenantIDs} {
			if _, err := root.CreateBucket(name); err != nil {
				return false, nil, err
			}
		}
		if err := raiseFormat(tx, formatIDs); err != nil {
			return false, nil, err
		}
	}
	ib, err := idBucketsOf(tx)
	if err != nil {
		return false, nil, err
	}
	for _, kind := range []struct {
		b   *bolt.Bucket
		ids map[string]int64
	}{{ib.tool, p.Tools}, {ib.tenant, p.Tenants}} {
		high := kind.b.Sequence()
		for _, name := range slices.Sorted(maps.Keys(kind.ids)) {
			id := uint64(kind.ids[name])
			if err := putUint64(kind.b, []byte(name), id); err != nil {
				return false, nil, err
			}
			high = max(high, id)
			changed = true
		}
		if err := kind.b.SetSequence(high); err != nil {
			return false, nil, err
		}
	}
	assigned, err := backfillIDs(tx, ib)
	return changed || assigned, nil, err
}

// backfillIDs gives an id to every tenant with findings, then to every
// tool code of a stored finding, that has none, each in byte order.
func backfillIDs(tx *bolt.Tx, ib idBuckets) (bool, error) {
	root := tx.Bucket(bucketFindings)
	if root == nil {
		return false, nil
	}
	var tenants []string
	err := root.ForEachBucket(func(k []byte) error {
		tenants = append(tenants, string(k))
		return nil
	})
	if err != nil {
		return false, err
	}
	tools := map[string]bool{}
	assigned := false
	for _, tenant := range tenants {
		a, err := ensureID(ib.tenant, []byte(tenant))
		if err != nil {
			return false, err
		}
		assigned = assigned || a
		tb, ok, err := tenantFindings(tx, tenant, false)
		if err != nil || !ok {
			return false, err
		}
		// The tool codes, from by_time's filter fields (the record of the
		// entries written before they existed).
		err = tb.byTime.ForEach(func(k, v []byte) error {
			if fv, ok := parseFilterFields(v); ok {
				if !tools[string(fv.tool)] { // no allocation when known
					tools[string(fv.tool)] = true
				}
				return nil
			}
			var r findingRecord
			rec := tb.byUID.Get(k[8:])
			if rec == nil {
				return fmt.Errorf("findings of tenant %q: index names missing finding %s", tenant, k[8:])
			}
			if err := decodeRecord(rec, &r); err != nil {
				return err
			}
			tools[r.ToolCode] = true
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(tools)) {
		a, err := ensureID(ib.tool, []byte(tool))
		if err != nil {
			return false, err
		}
		assigned = assigned || a
	}
	return assigned, nil
}

// insertIDs gives the tenant and tool of the findings an InsertFindings
// entry stores their ids, once ids are on. Each name is looked up once
// per entry.
type insertIDs struct {
	ib    idBuckets
	tools map[string]struct{} // the tool codes that have one
}

// tenant makes sure tenant has an id.
func (in *insertIDs) tenant(tenant string) error {
	if !in.ib.on() {
		return nil
	}
	_, err := ensureID(in.ib.tenant, []byte(tenant))
	return err
}

// tool makes sure tool has an id.
func (in *insertIDs) tool(tool string) error {
	if !in.ib.on() {
		return nil
	}
	if _, ok := in.tools[tool]; ok {
		return nil
	}
	if _, err := ensureID(in.ib.tool, []byte(tool)); err != nil {
		return err
	}
	if in.tools == nil {
		in.tools = make(map[string]struct{}, 4)
	}
	in.tools[tool] = struct{}{}
	return nil
}

// idReader fills in the ids of findings read in one transaction.
type idReader struct {
	ib     idBuckets
	tools  map[string]int64
	tenant string
	org    int64
}

// fill sets f's ToolID and OrgID (0 before AssignIDs).
func (r *idReader) fill(f *Finding) {
	if !r.ib.on() {
		return
	}
	if f.Tenant != r.tenant || r.org == 0 {
		r.tenant, r.org = f.Tenant, getID(r.ib.tenant, []byte(f.Tenant))
	}
	f.OrgID = r.org
	id, ok := r.tools[f.ToolCode]
	if !ok {
		id = getID(r.ib.tool, []byte(f.ToolCode))
		if r.tools == nil {
			r.tools = make(map[string]int64, 4)
		}
		r.tools[f.ToolCode] = id
	}
	f.ToolID = id
}

// readIDs returns the ids of a state file, nil before AssignIDs.
func readIDs(tx *bolt.Tx) (*IDs, error) {
	ib, err := idBucketsOf(tx)
	if err != nil || !ib.on() {
		return nil, err
	}
	ids := &IDs{Tools: map[string]int64{}, Tenants: map[string]int64{}}
	for _, kind := range []struct {
		b *bolt.Bucket
		m map[string]int64
	}{{ib.tool, ids.Tools}, {ib.tenant, ids.Tenants}} {
		err := kind.b.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("ids: %q: %d bytes, want 8", k, len(v))
			}
			kind.m[string(k)] = int64(binary.BigEndian.Uint64(v))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// IDs returns the ids of tools and tenants of the local state: nil until
// the AssignIDs entry turned them on (below LevelTypedIDs, or before the
// first finding of a cluster at that level).
func (s *Store) IDs() (*IDs, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	return f.readIDs()
}

// readIDs returns the ids of f's state (nil before any were assigned).
func (f *fsm) readIDs() (*IDs, error) {
	var ids *IDs
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		ids, err = readIDs(tx)
		return err
	})
	return ids, err
}

// idNames collects the tenants and tool codes of findings, to number
// them as AssignIDs would: a restore of a backup without ids.
type idNames struct {
	tools, tenants map[string]bool
}

func (n *idNames) add(f *Finding) {
	if n.tools == nil {
		n.tools, n.tenants = map[string]bool{}, map[string]bool{}
	}
	n.tools[f.ToolCode] = true
	n.tenants[f.Tenant] = true
}

// ids numbers the names from 1, in byte order: the ids AssignIDs gives a
// state that holds those findings and no ids.
func (n *idNames) ids() *IDs {
	number := func(set map[string]bool) map[string]int64 {
		m := make(map[string]int64, len(set))
		for i, name := range slices.Sorted(maps.Keys(set)) {
			m[name] = int64(i + 1)
		}
		return m
	}
	return &IDs{Tools: number(n.tools), Tenants: number(n.tenants)}
}

// hasFindings reports whether the state file holds findings.
func (f *fsm) hasFindings() bool {
	has := false
	_ = f.view(func(tx *bolt.Tx) error {
		has = tx.Bucket(bucketFindings) != nil
		return nil
	})
	return has
}

// hasIDs reports whether the state has ids on.
func (f *fsm) hasIDs() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.ids
}

// idsRecheck is how often the leader checks the cluster's level while ids
// are off, besides whenever a member's level changes: a member removed
// from raft's configuration raises it too.
const idsRecheck = 10 * time.Second

// ensureIDs writes the AssignIDs entry, on the leader, when the cluster
// is at LevelTypedIDs and the state has no ids yet; when findings says
// so, only if the state holds findings (there is something to number).
// Store.InsertFindings calls it first, so that the first findings stored
// at that level get their ids; a fresh cluster thus writes the entry with
// its first finding, not when it starts (a master of an older release
// may still join a cluster that has stored nothing).
func (s *Store) ensureIDs(ctx context.Context, findings bool) error {
	f := s.fsm.Load()
	if f == nil || f.hasIDs() || s.ClusterFeatureLevel() < LevelTypedIDs {
		return nil
	}
	s.idsMu.Lock()
	defer s.idsMu.Unlock()
	if f.hasIDs() || (findings && !f.hasFindings()) {
		return nil
	}
	res, err := s.Apply(ctx, nil, AssignIDs{})
	if err != nil {
		return fmt.Errorf("assign ids: %w", err)
	}
	if res.Err != nil {
		return fmt.Errorf("assign ids: %w", res.Err)
	}
	s.logger.Info("assigned the ids of tools and tenants", "index", res.Index)
	return nil
}

// assignIDs runs on the leader once it is ready: as soon as the cluster
// is at LevelTypedIDs while the state holds findings and no ids (findings
// stored below that level), it writes the AssignIDs entry, which numbers
// them. It returns once the state has ids, or when the leadership ends.
func (s *Store) assignIDs(l *leadership) {
	const retry = 200 * time.Millisecond
	for {
		f := s.fsm.Load()
		if f == nil || f.hasIDs() {
			return
		}
		changed := f.levelsChanged()
		wait := idsRecheck
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ApplyTimeout)
		err := s.ensureIDs(ctx, true)
		cancel()
		switch {
		case errors.Is(err, ErrClosed) || errors.Is(err, ErrNotLeader):
			// The next leader, if any, writes it.
			return
		case err != nil:
			s.logger.Warn("assigning the ids of tools and tenants failed; retrying", "error", err)
			wait = retry
		}
		if !s.leaderWait(l, wait, changed) {
			return
		}
	}
}

// levelsChanged returns a channel closed when the members' levels change.
func (f *fsm) levelsChanged() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.levelsCh
}
