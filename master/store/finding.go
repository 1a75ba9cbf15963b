package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	sjson "github.com/segmentio/encoding/json"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Finding is a security finding of one tenant, as stored. The store keeps
// what was submitted; the findings API derives the rest of its answer
// (names, host, e-mail address) from these fields.
type Finding struct {
	UID    string
	Tenant string
	// DiscoveredMS is the discovery time in Unix milliseconds, chosen by
	// the node that submitted the insert. UpdatedMS is the time of the last
	// patch (DiscoveredMS until then).
	DiscoveredMS int64
	UpdatedMS    int64

	MonitoredDomainID int64
	ToolCode          string
	// ResourceURL is the resource's URL, normalized by the caller.
	ResourceURL   string
	Username      string
	Password      string
	Hash          string
	HashAlgorithm string

	// State is the triage state; the store does not interpret it.
	State string
	// Ticket, Priority and Severity are "" when not set.
	Ticket   string
	Priority string
	Severity string

	// ToolID and OrgID are the ids of the tool code and of the tenant
	// (see ids.go), set on reads: 0 until the cluster assigns ids. They
	// are not part of the stored finding, and inserts ignore them.
	ToolID int64
	OrgID  int64
}

// FindingOutcome is the outcome of one finding of an InsertFindings
// command.
type FindingOutcome struct {
	// UID is the new finding's uid, or the uid of the identical finding
	// that already existed.
	UID string
	// Created is false when an identical finding already existed (same
	// tenant, monitored domain, resource, username and hash — or password
	// when there is no hash); nothing was stored then.
	Created bool
	// Err is why the finding was refused (ErrInvalidCommand).
	Err error
}

// InsertFindings stores findings, in order, in one log entry. UIDs and
// discovery times are chosen by the submitter. A finding identical to a
// stored one of the same tenant (see FindingOutcome.Created), or to an
// earlier one of the same command, is not stored again.
type InsertFindings struct {
	Findings []Finding
}

// PatchFinding changes the triage fields of finding UID of Tenant. A nil
// field is left as it is; a pointer to "" clears Ticket, Priority or
// Severity. It is refused with ErrNoFinding when the tenant has no such
// finding.
type PatchFinding struct {
	Tenant   string
	UID      string
	State    *string
	Ticket   *string
	Priority *string
	Severity *string
	// Now becomes the finding's UpdatedMS.
	Now time.Time
}

// findingRecord is a finding's payload in InsertFindings entries and its
// stored form.
type findingRecord struct {
	UID               string `json:"uid"`
	Tenant            string `json:"tenant"`
	DiscoveredMS      int64  `json:"discovered_ms"`
	UpdatedMS         int64  `json:"updated_ms"`
	MonitoredDomainID int64  `json:"monitored_domain_id"`
	ToolCode          string `json:"tool_code"`
	ResourceURL       string `json:"resource_url"`
	Username          string `json:"username"`
	Password          string `json:"password,omitempty"`
	Hash              string `json:"hash,omitempty"`
	HashAlgorithm     string `json:"hash_algorithm,omitempty"`
	State             string `json:"state"`
	Ticket            string `json:"ticket,omitempty"`
	Priority          string `json:"priority,omitempty"`
	Severity          string `json:"severity,omitempty"`
	// ToolID and OrgID are Finding's, never stored nor written in an
	// entry: the ids live in the ids bucket.
	ToolID int64 `json:"-"`
	OrgID  int64 `json:"-"`
}

// ClearFindings deletes every finding of every tenant. A restore of a
// backup with findings submits it, in one entry with RestoreState, before
// inserting the backup's findings.
type ClearFindings struct{}

type (
	clearFindingsPayload  struct{}
	insertFindingsPayload struct {
		Findings []findingRecord `json:"findings"`
	}
	patchFindingPayload struct {
		Tenant   string  `json:"tenant"`
		UID      string  `json:"uid"`
		State    *string `json:"state,omitempty"`
		Ticket   *string `json:"ticket,omitempty"`
		Priority *string `json:"priority,omitempty"`
		Severity *string `json:"severity,omitempty"`
		NowMS    int64   `json:"now_ms"`
	}
)

func (InsertFindings) cmdType() cmdType { return typeInsertFindings }
func (PatchFinding) cmdType() cmdType   { return typePatchFinding }
func (ClearFindings) cmdType() cmdType  { return typeClearFindings }

func (ClearFindings) payload() (any, error) { return clearFindingsPayload{}, nil }

func (c InsertFindings) payload() (any, error) {
	if len(c.Findings) == 0 {
		return nil, fmt.Errorf("%w: insert findings needs at least one finding", ErrInvalidCommand)
	}
	p := insertFindingsPayload{Findings: make([]findingRecord, 0, len(c.Findings))}
	for i, f := range c.Findings {
		if err := checkFinding(f); err != nil {
			return nil, fmt.Errorf("finding %d: %w", i, err)
		}
		p.Findings = append(p.Findings, findingRecord(f))
	}
	return p, nil
}

func (c PatchFinding) payload() (any, error) {
	if c.Tenant == "" || c.UID == "" {
		return nil, fmt.Errorf("%w: patch finding needs a tenant and a uid", ErrInvalidCommand)
	}
	if c.State != nil && *c.State == "" {
		return nil, fmt.Errorf("%w: a finding's state cannot be empty", ErrInvalidCommand)
	}
	return patchFindingPayload{
		Tenant: c.Tenant, UID: c.UID, State: c.State, Ticket: c.Ticket,
		Priority: c.Priority, Severity: c.Severity, NowMS: c.Now.UnixMilli(),
	}, nil
}

// checkFinding checks what the store itself relies on; the findings API
// validates the rest.
func checkFinding(f Finding) error {
	return checkRecord((*findingRecord)(&f))
}

// checkRecord is checkFinding of a record, without copying it.
func checkRecord(f *findingRecord) error {
	switch {
	case f.UID == "" || f.Tenant == "":
		return fmt.Errorf("%w: a finding needs a uid and a tenant", ErrInvalidCommand)
	case f.DiscoveredMS < 0:
		return fmt.Errorf("%w: negative discovery time", ErrInvalidCommand)
	case f.State == "":
		return fmt.Errorf("%w: a finding needs a state", ErrInvalidCommand)
	}
	return nil
}

// The findings' part of the state file: bucket "findings" holds one
// bucket per tenant (named by the tenant), which holds
//
//	count    uint64 big-endian: the number of the tenant's findings
//	by_uid   uid -> the stored finding (see appendRecord): binary since
//	         format 5, findingRecord JSON before
//	by_time  (MaxInt64 - discovered_ms, 8 bytes big-endian) + uid -> the
//	         finding's filter fields (see filterFields): newest first, ties
//	         by uid ascending, in key order; entries written before the
//	         filter fields existed have an empty value
//	dedupe   (format 2 only, no longer written) SHA-256 of the identity
//	         (see appendDedupeKey) -> uid
//
// and bucket "finding_keys" (format 3) holds the dedupe key of every
// tenant's findings stored since format 3, in insertion order:
//
//	sequence number (uint64 big-endian) -> dedupe key (32 bytes) + uid
//
// See findingKeys.
var (
	bucketFindings    = []byte("findings")
	bucketByUID       = []byte("by_uid")
	bucketByTime      = []byte("by_time")
	bucketDedupe      = []byte("dedupe")
	bucketFindingKeys = []byte("finding_keys")
	keyCount          = []byte("count")
)

// timeKey returns the by_time key of a finding.
func timeKey(discoveredMS int64, uid string) []byte {
	return appendTimeKey(make([]byte, 0, 8+len(uid)), discoveredMS, uid)
}

// appendTimeKey appends the by_time key of a finding to dst.
func appendTimeKey(dst []byte, discoveredMS int64, uid string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(math.MaxInt64-discoveredMS))
	return append(dst, uid...)
}

// timeKeyMS returns the discovery time of a by_time key.
func timeKeyMS(k []byte) int64 {
	return math.MaxInt64 - int64(binary.BigEndian.Uint64(k[:8]))
}

// filterFields encodes what FindingQuery filters on besides time, as the
// by_time value of a finding, so that a filtered list walks by_time alone
// and reads only the records of its page: a version byte (1), the
// monitored domain id (uvarint), then state, tool code and username, each
// a uvarint length and the bytes.
func filterFields(r *findingRecord) []byte {
	return appendFilterFields(make([]byte, 0, 1+binary.MaxVarintLen64*4+len(r.State)+len(r.ToolCode)+len(r.Username)), r)
}

// appendFilterFields appends filterFields(r) to b.
func appendFilterFields(b []byte, r *findingRecord) []byte {
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(r.MonitoredDomainID))
	for _, s := range [...]string{r.State, r.ToolCode, r.Username} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// filterView is a parsed by_time value; its slices point into the value
// (valid for the transaction).
type filterView struct {
	domain                int64
	state, tool, username []byte
}

// parseFilterFields reads a by_time value; ok is false for an empty
// (older) or unreadable one.
func parseFilterFields(v []byte) (fv filterView, ok bool) {
	if len(v) == 0 || v[0] != 1 {
		return fv, false
	}
	v = v[1:]
	d, n := binary.Uvarint(v)
	if n <= 0 {
		return fv, false
	}
	fv.domain, v = int64(d), v[n:]
	for _, dst := range []*[]byte{&fv.state, &fv.tool, &fv.username} {
		l, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < l {
			return fv, false
		}
		*dst, v = v[n:n+int(l)], v[n+int(l):]
	}
	return fv, len(v) == 0
}

// appendDedupeKey appends to dst the dedupe key of a finding, which
// identifies it for idempotent inserts: its tenant, monitored domain,
// resource, username and hash, or its password when it has no hash. It is
// hashed so that no secret sits in the index in clear. The keys are in
// state files: their computation must never change
// (TestDedupeKey_Stable).
func appendDedupeKey(dst []byte, r *findingRecord) []byte {
	var buf [512]byte
	b := buf[:0]
	field := func(prefix, s string) {
		// Length-prefixed, so that no two tuples share an encoding.
		b = binary.BigEndian.AppendUint64(b, uint64(len(prefix)+len(s)))
		b = append(append(b, prefix...), s...)
	}
	field("", r.Tenant)
	var num [20]byte
	field("", string(strconv.AppendInt(num[:0], r.MonitoredDomainID, 10)))
	field("", r.ResourceURL)
	field("", r.Username)
	if r.Hash != "" {
		field("h:", r.Hash)
	} else {
		field("p:", r.Password)
	}
	sum := sha256.Sum256(b)
	return append(dst, sum[:]...)
}

// tenantBuckets are the buckets of one tenant's findings; dedupe is nil
// unless the tenant had findings under state file format 2.
type tenantBuckets struct {
	t, byUID, byTime, dedupe *bolt.Bucket
}

// setFormat marks the state file as written in formatRecords, unless it
// is of a later format.
func setFormat(tx *bolt.Tx) error { return raiseFormat(tx, formatRecords) }

// markRecordFormat marks the state file as written in formatRecords unless
// it is: it may hold binary records (format 5) from now on.
func markRecordFormat(tx *bolt.Tx) error { return setFormat(tx) }

// findingKeys is the dedupe index of the findings of every tenant. Each
// stored finding's dedupe key is appended, with its uid, to the
// finding_keys bucket under the bucket's next sequence number, and the
// key's first 8 bytes (its fingerprint) map to that sequence number in
// memory. A lookup reads the bucket only when the fingerprint is known, to
// compare the whole key, so a new finding costs an append at the end of
// the bucket. A content-addressed index in the state file (format 2's
// dedupe buckets) instead copied and wrote a random leaf page per finding
// on every node, the largest cost of an insert.
//
// The memory is rebuilt from the bucket whenever the state file is opened
// or replaced (38 bytes per finding at 1,000,000 findings). Only raft's FSM
// goroutine uses it, inside the state file's write transaction; when that
// transaction fails the process panics (see fsm.ApplyBatch), so the memory
// never outlives a rolled-back write.
type findingKeys struct {
	first map[uint64]uint64   // fingerprint -> sequence number
	more  map[uint64][]uint64 // further sequence numbers of a fingerprint shared by different keys
}

// dedupeKeySize is the size of a dedupe key (SHA-256).
const dedupeKeySize = sha256.Size

// loadFindingKeys reads the finding_keys bucket of a state file.
func loadFindingKeys(tx *bolt.Tx) (*findingKeys, error) {
	fk := &findingKeys{first: map[uint64]uint64{}, more: map[uint64][]uint64{}}
	b := tx.Bucket(bucketFindingKeys)
	if b == nil {
		return fk, nil
	}
	fk.first = make(map[uint64]uint64, b.Sequence())
	err := b.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) <= dedupeKeySize {
			return fmt.Errorf("finding_keys: malformed entry %x", k)
		}
		fk.add(binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(k))
		return nil
	})
	return fk, err
}

func (fk *findingKeys) add(fp, seq uint64) {
	if _, ok := fk.first[fp]; ok {
		fk.more[fp] = append(fk.more[fp], seq)
		return
	}
	fk.first[fp] = seq
}

// lookup returns the uid stored with dedupe key dk in b, or nil. The
// result points into the transaction's memory. known is false when no
// stored key shares dk's fingerprint (see insert).
func (fk *findingKeys) lookup(b *bolt.Bucket, dk []byte) (uid []byte, known bool) {
	fp := binary.BigEndian.Uint64(dk)
	seq, ok := fk.first[fp]
	if !ok {
		return nil, false
	}
	for i := -1; i < len(fk.more[fp]); i++ {
		if i >= 0 {
			seq = fk.more[fp][i]
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], seq)
		if v := b.Get(k[:]); len(v) > dedupeKeySize && string(v[:dedupeKeySize]) == string(dk) {
			return v[dedupeKeySize:], true
		}
	}
	return nil, true
}

// insert appends dk and uid to b and indexes them. known is lookup's:
// when false, the fingerprint is new and indexed without looking it up
// again.
func (fk *findingKeys) insert(b *bolt.Bucket, dk []byte, uid string, known bool) error {
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	// Bolt reads the value until the commit: a new slice per value.
	v := make([]byte, len(dk)+len(uid))
	copy(v[copy(v, dk):], uid)
	if err := b.Put(k[:], v); err != nil {
		return err
	}
	if fp := binary.BigEndian.Uint64(dk); known {
		fk.add(fp, seq)
	} else {
		fk.first[fp] = seq
	}
	return nil
}

// appendFillPercent is how full bolt fills the pages it splits in the
// buckets whose keys are written in about ascending order.
const appendFillPercent = 0.9

// clear forgets every key.
func (fk *findingKeys) clear() {
	clear(fk.first)
	clear(fk.more)
}

// tenantFindings returns the buckets of tenant, creating them when create
// is set; ok is false when they do not exist.
func tenantFindings(tx *bolt.Tx, tenant string, create bool) (tb tenantBuckets, ok bool, err error) {
	root := tx.Bucket(bucketFindings)
	if root == nil && create {
		if root, err = tx.CreateBucket(bucketFindings); err != nil {
			return tb, false, err
		}
		// A state file holding findings is format 2 or later: older
		// binaries must not restore it as a snapshot, silently dropping
		// the findings.
		if err := setFormat(tx); err != nil {
			return tb, false, err
		}
	}
	if root == nil {
		return tb, false, nil
	}
	tb.t = root.Bucket([]byte(tenant))
	if tb.t == nil {
		if !create {
			return tb, false, nil
		}
		if tb.t, err = root.CreateBucket([]byte(tenant)); err != nil {
			return tb, false, err
		}
		for _, name := range [][]byte{bucketByUID, bucketByTime} {
			if _, err := tb.t.CreateBucket(name); err != nil {
				return tb, false, err
			}
		}
	}
	// dedupe exists only in tenants that had findings under format 2.
	tb.byUID, tb.byTime, tb.dedupe = tb.t.Bucket(bucketByUID), tb.t.Bucket(bucketByTime), tb.t.Bucket(bucketDedupe)
	if tb.byUID == nil || tb.byTime == nil {
		return tb, false, fmt.Errorf("findings of tenant %q: missing index buckets", tenant)
	}
	return tb, true, nil
}

// applyInsertFindings stores the findings of an entry. Refusals are
// outcomes; the error is a failed write.
func applyInsertFindings(tx *bolt.Tx, keys *findingKeys, p *insertFindingsPayload) ([]FindingOutcome, error) {
	outs := make([]FindingOutcome, len(p.Findings))
	kb := tx.Bucket(bucketFindingKeys)
	// The tenants of the entry: their buckets are looked up, and their
	// counts read and written, once per entry rather than per finding.
	type tenant struct {
		tb           tenantBuckets
		count, start uint64
		// maxUID is by_uid's last key, then the greatest uid stored by
		// the entry: a uid above it is not taken without looking it up
		// (uids are UUIDv7, about ascending).
		maxUID []byte
		// hasID is set once the tenant's id was made sure of.
		hasID bool
	}
	tenants := map[string]*tenant{}
	ib, err := idBucketsOf(tx)
	if err != nil {
		return nil, err
	}
	ids := insertIDs{ib: ib}
	// scratch (keys), vbuf (values) and dkBuf are reused for each
	// finding; bolt copies keys, and reads values until the commit, so
	// the values it is given are copies.
	var (
		scratch, vbuf []byte
		dkBuf         [dedupeKeySize]byte
		marked        bool // markRecordFormat was called
	)
	for i := range p.Findings {
		r := &p.Findings[i]
		if err := checkRecord(r); err != nil {
			outs[i] = FindingOutcome{UID: r.UID, Err: err}
			continue
		}
		tn := tenants[r.Tenant]
		if tn == nil {
			tb, _, err := tenantFindings(tx, r.Tenant, true)
			if err != nil {
				return nil, err
			}
			n, err := getUint64(tb.t, keyCount)
			if err != nil {
				return nil, err
			}
			// by_uid's keys (UUIDv7) come in about ascending order:
			// fuller pages than bolt's default half-full splits mean
			// fewer pages to write (bolt does not store the setting).
			tb.byUID.FillPercent = appendFillPercent
			tn = &tenant{tb: tb, count: n, start: n}
			if last, _ := tb.byUID.Cursor().Last(); last != nil {
				tn.maxUID = append([]byte(nil), last...)
			}
			tenants[r.Tenant] = tn
		}
		tb := tn.tb
		if kb == nil {
			var err error
			if kb, err = tx.CreateBucket(bucketFindingKeys); err != nil {
				return nil, err
			}
			// Format 3: older binaries would not see these keys.
			if err := setFormat(tx); err != nil {
				return nil, err
			}
		}
		kb.FillPercent = appendFillPercent // appended in key order
		dk := appendDedupeKey(dkBuf[:0], r)
		uid, known := keys.lookup(kb, dk)
		if uid == nil && tb.dedupe != nil {
			uid = tb.dedupe.Get(dk)
		}
		if uid != nil {
			outs[i] = FindingOutcome{UID: string(uid)}
			continue
		}
		// Bolt copies keys (not values): the keys are built in scratch.
		uidKey := append(scratch[:0], r.UID...)
		scratch = uidKey
		if bytes.Compare(uidKey, tn.maxUID) > 0 {
			tn.maxUID = append(tn.maxUID[:0], uidKey...)
		} else if tb.byUID.Get(uidKey) != nil {
			outs[i] = FindingOutcome{UID: r.UID, Err: fmt.Errorf("%w: finding uid %s is taken", ErrInvalidCommand, r.UID)}
			continue
		}
		// The dedupe index first: its map's entry was just looked up.
		if err := keys.insert(kb, dk, r.UID, known); err != nil {
			return nil, err
		}
		var err error
		if vbuf, err = appendRecord(vbuf[:0], r); err != nil {
			return nil, err
		}
		if err := tb.byUID.Put(uidKey, bytes.Clone(vbuf)); err != nil {
			return nil, err
		}
		tk := appendTimeKey(scratch[:0], r.DiscoveredMS, r.UID)
		vbuf = appendFilterFields(vbuf[:0], r)
		if err := tb.byTime.Put(tk, bytes.Clone(vbuf)); err != nil {
			return nil, err
		}
		scratch = tk
		tn.count++
		if ib.on() {
			if !tn.hasID {
				if err := ids.tenant(r.Tenant); err != nil {
					return nil, err
				}
				tn.hasID = true
			}
			if err := ids.tool(r.ToolCode); err != nil {
				return nil, err
			}
		}
		outs[i] = FindingOutcome{UID: r.UID, Created: true}
		if !marked {
			if err := markRecordFormat(tx); err != nil {
				return nil, err
			}
			marked = true
		}
	}
	for _, tn := range tenants {
		if tn.count == tn.start {
			continue
		}
		if err := putUint64(tn.tb.t, keyCount, tn.count); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// applyClearFindings deletes the findings of every tenant, and reports
// whether there were any.
func applyClearFindings(tx *bolt.Tx, keys *findingKeys) (bool, error) {
	if tx.Bucket(bucketFindings) == nil {
		return false, nil
	}
	if tx.Bucket(bucketFindingKeys) != nil {
		if err := tx.DeleteBucket(bucketFindingKeys); err != nil {
			return false, err
		}
	}
	keys.clear()
	return true, tx.DeleteBucket(bucketFindings)
}

// applyPatchFinding changes a stored finding. ErrNoFinding and
// ErrInvalidCommand are refusals; other errors are failed writes.
func applyPatchFinding(tx *bolt.Tx, p *patchFindingPayload) error {
	if p.Tenant == "" || p.UID == "" || (p.State != nil && *p.State == "") {
		return fmt.Errorf("%w: patch finding needs a tenant, a uid and a non-empty state", ErrInvalidCommand)
	}
	tb, ok, err := tenantFindings(tx, p.Tenant, false)
	if err != nil {
		return err
	}
	var v []byte
	if ok {
		v = tb.byUID.Get([]byte(p.UID))
	}
	if v == nil {
		return fmt.Errorf("finding %s: %w", p.UID, ErrNoFinding)
	}
	var r findingRecord
	if err := decodeRecord(v, &r); err != nil {
		return fmt.Errorf("finding %s: %w", p.UID, err)
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&r.State, p.State)
	set(&r.Ticket, p.Ticket)
	set(&r.Priority, p.Priority)
	set(&r.Severity, p.Severity)
	r.UpdatedMS = p.NowMS
	rec, err := appendRecord(nil, &r)
	if err != nil {
		return err
	}
	if err := markRecordFormat(tx); err != nil {
		return err
	}
	if err := tb.byUID.Put([]byte(p.UID), rec); err != nil {
		return err
	}
	// The state is a filter field: keep by_time's copy current.
	return tb.byTime.Put(timeKey(r.DiscoveredMS, r.UID), filterFields(&r))
}

// FindingQuery selects and pages a tenant's findings. Zero fields do not
// filter.
type FindingQuery struct {
	State             string
	ToolCode          string
	MonitoredDomainID int64
	Username          string
	// FromMS (inclusive) and ToMS (exclusive) bound the discovery time,
	// in Unix milliseconds; 0 is unbounded.
	FromMS, ToMS int64
	// Offset findings are skipped; at most Limit are returned.
	Offset, Limit int
}

// filtered reports whether q filters on anything besides time.
func (q FindingQuery) filtered() bool {
	return q.State != "" || q.ToolCode != "" || q.MonitoredDomainID != 0 || q.Username != ""
}

func (q FindingQuery) match(r *findingRecord) bool {
	return (q.State == "" || r.State == q.State) &&
		(q.ToolCode == "" || r.ToolCode == q.ToolCode) &&
		(q.MonitoredDomainID == 0 || r.MonitoredDomainID == q.MonitoredDomainID) &&
		(q.Username == "" || r.Username == q.Username)
}

// matchFields is match on a by_time value's filter fields.
func (q FindingQuery) matchFields(fv *filterView) bool {
	return (q.State == "" || string(fv.state) == q.State) &&
		(q.ToolCode == "" || string(fv.tool) == q.ToolCode) &&
		(q.MonitoredDomainID == 0 || fv.domain == q.MonitoredDomainID) &&
		(q.Username == "" || string(fv.username) == q.Username)
}

// FindingPage is a page of findings and the number of all that match.
type FindingPage struct {
	Total    int
	Findings []Finding
}

// view runs fn in a read transaction on the state file, from any
// goroutine.
func (f *fsm) view(fn func(tx *bolt.Tx) error) error {
	f.dbMu.RLock()
	defer f.dbMu.RUnlock()
	err := f.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// appendJSONRecord appends the JSON form of a stored finding to dst,
// written with segmentio's encoder (faster than encoding/json, which
// reads it back: FuzzDecodeInsertFindings checks they agree).
func appendJSONRecord(dst []byte, r *findingRecord) ([]byte, error) {
	return sjson.Append(dst, r, recordFlags)
}

// recordFlags are the flags with which sjson.Marshal, and so
// appendJSONRecord, encodes.
const recordFlags = sjson.EscapeHTML | sjson.SortMapKeys

func decodeFinding(v []byte) (Finding, error) {
	var r findingRecord
	if err := decodeRecord(v, &r); err != nil {
		return Finding{}, err
	}
	return Finding(r), nil
}

// finding returns finding uid of tenant, or ErrNoFinding.
func (f *fsm) finding(tenant, uid string) (Finding, error) {
	var out Finding
	err := f.view(func(tx *bolt.Tx) error {
		tb, ok, err := tenantFindings(tx, tenant, false)
		if err != nil {
			return err
		}
		var v []byte
		if ok {
			v = tb.byUID.Get([]byte(uid))
		}
		if v == nil {
			return fmt.Errorf("finding %s: %w", uid, ErrNoFinding)
		}
		if out, err = decodeFinding(v); err != nil {
			return err
		}
		one := []Finding{out}
		err = fillIDs(tx, one)
		out = one[0]
		return err
	})
	return out, err
}

// findings returns a page of tenant's findings, newest first (ties by uid),
// walking the by_time index: the unfiltered first page reads Limit records,
// whatever the number of findings.
func (f *fsm) findings(tenant string, q FindingQuery) (FindingPage, error) {
	page := FindingPage{Findings: []Finding{}}
	walk := func(tx *bolt.Tx) error {
		tb, ok, err := tenantFindings(tx, tenant, false)
		if err != nil || !ok {
			return err
		}
		c := tb.byTime.Cursor()
		var k, v []byte
		if q.ToMS > 0 {
			// The first key discovered before ToMS.
			k, v = c.Seek(timeKey(q.ToMS-1, ""))
		} else {
			k, v = c.First()
		}
		inRange := func(k []byte) bool { return k != nil && (q.FromMS <= 0 || timeKeyMS(k) >= q.FromMS) }
		get := func(k []byte) (*findingRecord, error) {
			var r findingRecord
			v := tb.byUID.Get(k[8:])
			if v == nil {
				return nil, fmt.Errorf("findings of tenant %q: index names missing finding %s", tenant, k[8:])
			}
			return &r, decodeRecord(v, &r)
		}
		// add reads the record k names into the page.
		add := func(k []byte) error {
			r, err := get(k)
			if err != nil {
				return err
			}
			page.Findings = append(page.Findings, Finding(*r))
			return nil
		}
		if !q.filtered() && q.FromMS <= 0 && q.ToMS <= 0 {
			n, err := getUint64(tb.t, keyCount)
			if err != nil {
				return err
			}
			page.Total = int(n)
			// Skip Offset keys, then read Limit records.
			for i := 0; k != nil && i < q.Offset; i++ {
				k, _ = c.Next()
			}
			for ; k != nil && len(page.Findings) < q.Limit; k, _ = c.Next() {
				if err := add(k); err != nil {
					return err
				}
			}
			return nil
		}
		for ; inRange(k); k, v = c.Next() {
			if !q.filtered() {
				// Time range only: count keys, read the page's records.
				if page.Total >= q.Offset && len(page.Findings) < q.Limit {
					if err := add(k); err != nil {
						return err
					}
				}
				page.Total++
				continue
			}
			inPage := page.Total >= q.Offset && len(page.Findings) < q.Limit
			if fv, ok := parseFilterFields(v); ok {
				// Filter on by_time's copy; read only the page's records.
				if !q.matchFields(&fv) {
					continue
				}
				if inPage {
					if err := add(k); err != nil {
						return err
					}
				}
				page.Total++
				continue
			}
			r, err := get(k)
			if err != nil {
				return err
			}
			if !q.match(r) {
				continue
			}
			if inPage {
				page.Findings = append(page.Findings, Finding(*r))
			}
			page.Total++
		}
		return nil
	}
	err := f.view(func(tx *bolt.Tx) error {
		if err := walk(tx); err != nil {
			return err
		}
		return fillIDs(tx, page.Findings)
	})
	return page, err
}

// fillIDs sets the ids of findings read in tx (see ids.go).
func fillIDs(tx *bolt.Tx, fs []Finding) error {
	ib, err := idBucketsOf(tx)
	if err != nil || !ib.on() {
		return err
	}
	r := idReader{ib: ib}
	for i := range fs {
		r.fill(&fs[i])
	}
	return nil
}

// Finding returns finding uid of tenant from the local state, or
// ErrNoFinding. Another tenant's finding is ErrNoFinding too.
func (s *Store) Finding(tenant, uid string) (Finding, error) {
	f := s.fsm.Load()
	if f == nil {
		return Finding{}, ErrNotOpen
	}
	return f.finding(tenant, uid)
}

// Findings returns a page of tenant's findings matching q from the local
// state, newest first, ties by uid ascending, and the number of all that
// match. A Limit of 0 or less returns no findings, only the total.
func (s *Store) Findings(tenant string, q FindingQuery) (FindingPage, error) {
	f := s.fsm.Load()
	if f == nil {
		return FindingPage{}, ErrNotOpen
	}
	q.Offset = max(q.Offset, 0)
	return f.findings(tenant, q)
}

// PatchFinding applies p on the leader, submitted with sess (nil: none;
// see Apply). A refusal (ErrNoFinding) is returned as the error.
func (s *Store) PatchFinding(ctx context.Context, sess *Session, p PatchFinding) error {
	res, err := s.Apply(ctx, sess, p)
	if err != nil {
		return err
	}
	return res.Err
}

// InsertFindings stores findings in one log entry on the leader and
// returns one outcome per finding.
func (s *Store) InsertFindings(ctx context.Context, findings []Finding) ([]FindingOutcome, error) {
	if err := s.ensureIDs(ctx, false); err != nil {
		return nil, err
	}
	res, err := s.Apply(ctx, nil, InsertFindings{Findings: findings})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if len(res.Findings) != len(findings) {
		return nil, fmt.Errorf("insert findings: %d outcomes for %d findings", len(res.Findings), len(findings))
	}
	return res.Findings, nil
}

// Group commit of InsertFinding: concurrent inserts on the leader share
// one InsertFindings entry.
const (
	// findingBatchWait is how long the first insert of a batch waits for
	// others to join it.
	findingBatchWait = 2 * time.Millisecond
	// findingBatchMax is the most findings of one batch; a full batch is
	// submitted at once.
	findingBatchMax = 64
)

// findingBatcher collects concurrent InsertFinding calls. It runs no
// goroutine of its own: a batch is submitted by the timer of its first
// insert, by the insert that fills it, or by the insert that clocks it
// (below). A batch whose window ends while another batch is in raft is
// late: it is submitted half a window after that batch is answered (or
// when full or clocked), so that the answered callers join it
// (windowEnd). While inserts come one at a time (the last batch held one
// finding) an insert that finds no batch open or in raft is submitted
// alone at once, so that a lone client does not wait for the window;
// under load, batches keep their size.
//
// Self-clocked close (docs/decisions.md decision 47): when a batch of n
// findings is answered and no other is in raft, its n callers are the
// ones expected back. The open batch (late, in its window, or opened
// after the answer) is submitted as soon as n inserts came after the
// answer, instead of waiting for 64 or a timer: a closed loop of fewer
// than 64 clients submits when its clients are back, not when the window
// or the grace ends. Counting the inserts since the answer, not the
// batch's findings, keeps the batch from shrinking: it holds every
// answered caller that came back plus those that waited behind the
// answered batch, so two groups of clients taking turns merge into one
// (submitting at n findings in all measured smaller batches and more CPU
// per insert under load, docs/BENCHMARKS.md "Measured and not kept"). The window and
// the grace remain the bound of every wait (a client that left, open-loop
// arrivals at a steady rate); the clock applies to the one batch after
// each answer.
type findingBatcher struct {
	mu       sync.Mutex
	cur      *findingBatch
	inFlight int // batches submitted and not yet answered
	lastSize int // findings of the last batch answered
	// expect is the size of the last batch answered while no other was
	// in raft, and back the inserts since that answer (at answeredAt),
	// until the next batch is submitted; expect is 0 otherwise.
	expect, back int
	answeredAt   time.Time

	// apply stores a batch's findings in one entry (Store.InsertFindings
	// within the ApplyTimeout); set by New, or by tests.
	apply   func(ctx context.Context, items []Finding) ([]FindingOutcome, error)
	metrics *metrics
	// wait replaces findingBatchWait when set (tests).
	wait time.Duration
}

// window is how long the first insert of a batch waits for others.
func (b *findingBatcher) window() time.Duration {
	return cmp.Or(b.wait, findingBatchWait)
}

// grace is how long after a batch is answered its callers are expected
// back: half the window.
func (b *findingBatcher) grace() time.Duration {
	return b.window() / 2
}

// clocked reports whether the open batch is to be submitted now by the
// self-clocked close: the callers of the last batch answered are back
// (see findingBatcher). b.mu is held.
func (b *findingBatcher) clocked() bool {
	return b.expect > 0 && b.inFlight == 0 && b.back >= b.expect
}

// forget ends the self-clocked close of the last answer: a batch is
// being submitted. b.mu is held.
func (b *findingBatcher) forget() {
	b.expect, b.back, b.answeredAt = 0, 0, time.Time{}
}

// findingBatch is one group of inserts, submitted once.
type findingBatch struct {
	opened time.Time       // when its first insert came
	ctx    context.Context // the first caller's, without its cancellation
	items  []Finding
	timer  *time.Timer // guarded by findingBatcher.mu
	late   bool        // its window ended while another batch was in raft
	once   sync.Once
	done   chan struct{} // closed when outs and err are set
	outs   []FindingOutcome
	err    error
}

// Why a batch was submitted: the label of squall_store_finding_batches_total.
const (
	closeAlone   = "alone"   // one insert while inserts come one at a time
	closeFull    = "full"    // findingBatchMax findings
	closeClocked = "clocked" // the self-clocked close
	closeWindow  = "window"  // its window ended with no batch in raft
	closeGrace   = "grace"   // late, half a window after the answer
)

// InsertFinding stores one finding on the leader, in one log entry with
// the other inserts that arrive within about 2 ms, longer while another
// entry of inserts is in raft, shorter when the callers of the last entry
// are back (at most 64 per entry; while inserts come one at a time, each
// is submitted at once), and returns its outcome. After a ctx error or
// ErrLeadershipLost the finding may still be stored; a retry with the
// same content is deduplicated.
func (s *Store) InsertFinding(ctx context.Context, f Finding) (FindingOutcome, error) {
	if err := checkFinding(f); err != nil {
		return FindingOutcome{}, err
	}
	if _, err := s.leaderNode(); err != nil {
		return FindingOutcome{}, err
	}
	return s.findingBatch.insert(ctx, f)
}

// insert adds f to a batch and waits for its outcome.
func (b *findingBatcher) insert(ctx context.Context, f Finding) (FindingOutcome, error) {
	b.mu.Lock()
	if b.cur == nil && b.inFlight == 0 && b.lastSize <= 1 {
		alone := &findingBatch{opened: time.Now(), ctx: context.WithoutCancel(ctx), items: []Finding{f}, done: make(chan struct{})}
		b.forget()
		b.inFlight++
		b.mu.Unlock()
		b.metrics.findingBatches.WithLabelValues(closeAlone).Inc()
		go b.run(alone)
		return waitFinding(ctx, alone, 0)
	}
	cur := b.cur
	if cur == nil {
		cur = &findingBatch{opened: time.Now(), ctx: context.WithoutCancel(ctx), items: make([]Finding, 0, findingBatchMax), done: make(chan struct{})}
		b.cur = cur
		cur.timer = time.AfterFunc(b.window(), func() { b.windowEnd(cur) })
	}
	if b.expect > 0 {
		b.back++
	}
	i := len(cur.items)
	cur.items = append(cur.items, f)
	var closed string
	switch {
	case len(cur.items) >= findingBatchMax:
		closed = closeFull
	case b.clocked():
		closed = closeClocked
	}
	timer := cur.timer
	if closed != "" {
		b.cur = nil
	}
	b.mu.Unlock()
	if closed != "" {
		timer.Stop()
		b.flush(cur, closed)
	}
	return waitFinding(ctx, cur, i)
}

// waitFinding waits for the outcome of finding i of batch, or ctx.
func waitFinding(ctx context.Context, batch *findingBatch, i int) (FindingOutcome, error) {
	select {
	case <-batch.done:
	case <-ctx.Done():
		return FindingOutcome{}, ctx.Err()
	}
	if batch.err != nil {
		return FindingOutcome{}, batch.err
	}
	return batch.outs[i], nil
}

// flush submits batch, once; closed says why.
func (b *findingBatcher) flush(batch *findingBatch, closed string) {
	batch.once.Do(func() {
		b.mu.Lock()
		if b.cur == batch {
			b.cur = nil
		}
		if b.inFlight == 0 && !b.answeredAt.IsZero() {
			// The part of its wait after the answer (all of it when it
			// opened after the answer).
			from := b.answeredAt
			if batch.opened.After(from) {
				from = batch.opened
			}
			b.metrics.findingBatchAfterAnswer.Observe(time.Since(from).Seconds())
		}
		b.forget()
		b.inFlight++
		b.mu.Unlock()
		b.metrics.findingBatches.WithLabelValues(closed).Inc()
		b.run(batch)
	})
}

// run applies a submitted batch (counted in inFlight) and answers its
// callers.
func (b *findingBatcher) run(batch *findingBatch) {
	b.metrics.findingBatchWait.Observe(time.Since(batch.opened).Seconds())
	b.metrics.findingBatchSize.Observe(float64(len(batch.items)))
	batch.outs, batch.err = b.apply(batch.ctx, batch.items)
	b.answered(len(batch.items))
	close(batch.done)
}

// answered counts a submitted batch of n findings as answered.
func (b *findingBatcher) answered(n int) {
	b.mu.Lock()
	b.inFlight--
	b.lastSize = n
	if b.inFlight == 0 {
		// Its n callers are expected back: the self-clocked close.
		b.expect, b.back, b.answeredAt = n, 0, time.Now()
	}
	if cur := b.cur; cur != nil && cur.late {
		// The callers this batch answers come back within about one
		// HTTP round trip: give them half a window to join the open
		// batch, whose window has ended.
		cur.late = false
		cur.timer = time.AfterFunc(b.grace(), func() { b.flush(cur, closeGrace) })
	}
	b.mu.Unlock()
}

// windowEnd ends the window of batch: it is submitted now, unless another
// batch is in raft. Then it is late: it stays open until a batch in raft
// is answered and half a window more (answered), or until it is full or
// clocked, so that the callers of the batch in raft, who come back as
// soon as it is answered, join it instead of forming a batch of their
// own. A closed loop of clients thus keeps to one batch in raft at a
// time, as large as the clients are many (up to findingBatchMax),
// instead of splitting into groups that each wait out the window.
func (b *findingBatcher) windowEnd(batch *findingBatch) {
	b.mu.Lock()
	if b.cur == batch && b.inFlight > 0 {
		batch.late = true
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.flush(batch, closeWindow)
}
