package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Defaults of [Config].
const (
	// DefaultMaxEntries bounds the remembered delivery ids: 250,000
	// entries take about 15 MB of memory and 16 MB of file.
	DefaultMaxEntries = 250_000
	// FileName is the name of the store's file in a satellite's spool
	// directory.
	FileName = "dedupe.db"
)

// ErrClosed reports a call on a store that is not open.
var ErrClosed = errors.New("dedupe store closed")

// Config configures a [Store].
type Config struct {
	// Path is the bbolt file. Required.
	Path string
	// MaxEntries bounds the number of remembered ids (default
	// DefaultMaxEntries).
	MaxEntries int
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path: required"))
	}
	if c.MaxEntries < 1 {
		errs = append(errs, fmt.Errorf("max_entries: %d is less than 1", c.MaxEntries))
	}
	return errors.Join(errs...)
}

// The file has one bucket whose keys are the expiry (Unix milliseconds,
// big-endian) then the key of the delivery, and whose values are the event
// ids (16 bytes): the order of the keys is the order of expiry, so new
// entries are appended at the end (in practice: windows differ per
// webhook) and the oldest are pruned from the start.
var bucketEntries = []byte("entries")

const (
	keyLen   = 16           // truncated SHA-256 of the webhook and delivery ids
	fileKey  = 8 + keyLen   // expiry + key
	eventLen = 16           // a UUID
	batchMax = 1024         // commits written in one transaction at most
	openTx   = batchMax * 8 // entries pruned in one transaction at Open
)

// gatherTime is how long the writer waits for more commits after the first
// of a group.
const gatherTime = 10 * time.Millisecond

// key identifies a delivery: the first 16 bytes of the SHA-256 of the
// webhook id and the delivery id (a collision among 250,000 entries has a
// probability of about 2^-92).
type key [keyLen]byte

// entry is a remembered delivery.
type entry struct {
	expires int64 // Unix milliseconds
	event   [eventLen]byte
}

// Store remembers delivery ids. Build it with [New], then [Store.Open] it;
// [Store.Close] writes what is queued and closes the file.
type Store struct {
	cfg    Config
	logger *slog.Logger
	m      *metrics
	now    func() time.Time // the clock of pruning when writing

	mu       sync.Mutex
	db       *bolt.DB
	entries  map[key]entry    // committed deliveries, in the file or queued
	inflight map[key]*pending // claims in progress
	onDisk   int              // entries in the file
	closed   bool
	senders  sync.WaitGroup // Commits sending to queue
	queue    chan commit
	written  chan struct{} // closed when the writer has stopped
}

// pending is the outcome of a claim, shared with the calls waiting for it.
type pending struct {
	done    chan struct{} // closed once ok and eventID are set
	ok      bool
	eventID string
}

type commit struct {
	key     key
	entry   entry
	flushed chan struct{} // a marker of flush, not a commit
}

// New builds a Store whose metrics are registered with reg (nil registers
// nothing). It opens nothing.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dedupe config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, logger: logger.With("component", "dedupe"), now: time.Now, closed: true}
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Open opens (or creates) the file, drops the entries expired at now (and
// the oldest past MaxEntries), loads the others into memory, and starts
// the writer. A file that bbolt cannot read is set aside (renamed with a
// .corrupt suffix, logged) and a new one started: losing the window must
// not keep the satellite down.
func (s *Store) Open(ctx context.Context, now time.Time) error {
	db, err := openFile(s.cfg.Path)
	if err != nil && !errors.Is(err, berrors.ErrTimeout) && ctx.Err() == nil {
		aside := fmt.Sprintf("%s.corrupt-%d", s.cfg.Path, now.UnixMilli())
		if rerr := os.Rename(s.cfg.Path, aside); rerr == nil {
			s.logger.Error("dedupe file unreadable: set aside, the remembered delivery ids are lost", "path", s.cfg.Path, "moved_to", aside, "error", err)
			db, err = openFile(s.cfg.Path)
		}
	}
	if err != nil {
		return fmt.Errorf("open dedupe file: %w", err)
	}
	entries, err := load(db, now.UnixMilli(), s.cfg.MaxEntries)
	if err != nil {
		return errors.Join(fmt.Errorf("open dedupe file: %w", err), db.Close())
	}
	s.mu.Lock()
	s.db, s.entries, s.onDisk, s.closed = db, entries, len(entries), false
	s.inflight = make(map[key]*pending)
	s.queue = make(chan commit, batchMax)
	s.written = make(chan struct{})
	s.mu.Unlock()
	go s.write()
	s.logger.Info("dedupe store opened", "path", s.cfg.Path, "entries", len(entries), "max_entries", s.cfg.MaxEntries)
	return nil
}

func openFile(path string) (*bolt.DB, error) {
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
}

// load prunes the file of the entries expired at now and of the oldest
// past max, in bounded transactions, then reads the rest.
func load(db *bolt.DB, now int64, max int) (map[key]entry, error) {
	count := 0
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketEntries)
		if err != nil {
			return err
		}
		count = b.Stats().KeyN
		return nil
	}); err != nil {
		return nil, err
	}
	for {
		n := 0
		err := db.Update(func(tx *bolt.Tx) error {
			cur := tx.Bucket(bucketEntries).Cursor()
			for k, _ := cur.First(); k != nil && n < openTx; k, _ = cur.First() {
				if len(k) == fileKey && int64(binary.BigEndian.Uint64(k)) > now && count <= max {
					break
				}
				if err := cur.Delete(); err != nil {
					return err
				}
				n++
				count--
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if n < openTx {
			break
		}
	}
	entries := make(map[key]entry, count)
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntries).ForEach(func(k, v []byte) error {
			if len(k) != fileKey || len(v) != eventLen {
				return nil // not ours; pruned when it comes first
			}
			var e entry
			e.expires = int64(binary.BigEndian.Uint64(k))
			copy(e.event[:], v)
			entries[key(k[8:])] = e // a later expiry of the same key wins
			return nil
		})
	})
	return entries, err
}

// Claim is the outcome of [Store.Begin].
type Claim struct {
	// Duplicate reports that the delivery was accepted before, within its
	// window: EventID is that call's event id, and nothing is to be
	// committed.
	Duplicate bool
	// EventID is the first call's event id, for a duplicate.
	EventID string

	s   *Store
	key key
	p   *pending
}

// keyOf returns the key of a delivery.
func keyOf(webhookID, deliveryID string) key {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{0})
	h.Write([]byte(deliveryID))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return key(sum[:keyLen])
}

// Begin looks up the delivery deliveryID of webhook webhookID at time now.
// A duplicate is returned as such. Otherwise the caller owns the claim on
// the id and must end it with [Claim.Commit] or [Claim.Abort]; meanwhile,
// other Begins of the same id wait (until ctx ends).
func (s *Store) Begin(ctx context.Context, webhookID, deliveryID string, now time.Time) (*Claim, error) {
	k := keyOf(webhookID, deliveryID)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if e, ok := s.entries[k]; ok && e.expires > now.UnixMilli() {
			s.mu.Unlock()
			return &Claim{Duplicate: true, EventID: formatUUID(e.event)}, nil
		}
		p := s.inflight[k]
		if p == nil {
			p = &pending{done: make(chan struct{})}
			s.inflight[k] = p
			s.mu.Unlock()
			return &Claim{s: s, key: k, p: p}, nil
		}
		s.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for a concurrent delivery with the same id: %w", ctx.Err())
		}
		if p.ok {
			return &Claim{Duplicate: true, EventID: p.eventID}, nil
		}
		// That call failed: try to claim the id ourselves.
	}
}

// Commit records that the delivery was accepted as event eventID (a UUID),
// to be remembered until expires. The calls waiting on the claim get
// eventID at once; the entry is written to the file shortly after. Commit
// on a duplicate, or after Abort, is a no-op.
func (c *Claim) Commit(eventID string, expires time.Time) {
	if c.p == nil {
		return
	}
	p, s := c.p, c.s
	c.p = nil
	p.ok, p.eventID = true, eventID
	event, ok := parseUUID(eventID)
	s.mu.Lock()
	delete(s.inflight, c.key)
	e := entry{expires: expires.UnixMilli(), event: event}
	if ok && !s.closed {
		s.entries[c.key] = e
		s.senders.Add(1)
	}
	closed := s.closed
	s.mu.Unlock()
	close(p.done)
	switch {
	case !ok:
		s.logger.Warn("event id is not a UUID: its delivery id is not remembered")
	case closed:
		s.logger.Warn("delivery id committed after the dedupe store closed: not remembered")
	default:
		s.queue <- commit{key: c.key, entry: e}
		s.senders.Done()
	}
}

// Abort ends the claim of a call whose event was not accepted: the id is
// not remembered, and the next call with it (a waiting one or a retry)
// claims it. Abort after Commit, or on a duplicate, is a no-op.
func (c *Claim) Abort() {
	if c.p == nil {
		return
	}
	p := c.p
	c.p = nil
	c.s.mu.Lock()
	delete(c.s.inflight, c.key)
	c.s.mu.Unlock()
	close(p.done)
}

// write writes the queued commits, in groups, until the queue is closed.
func (s *Store) write() {
	defer close(s.written)
	batch := make([]commit, 0, batchMax)
	var markers []chan struct{}
	// Go 1.23 timers: Reset and Stop leave no stale tick to drain.
	gather := time.NewTimer(gatherTime)
	gather.Stop()
	for c := range s.queue {
		batch, markers = append(batch[:0], c), markers[:0]
		// Gather what comes within gatherTime (or a full batch): one
		// transaction for many commits costs less than one each. A
		// flush marker ends the group at once.
		gather.Reset(gatherTime)
		for open := true; open && len(batch) < batchMax && c.flushed == nil; {
			select {
			case c, open = <-s.queue:
				if open {
					batch = append(batch, c)
				}
			case <-gather.C:
				open = false
			}
		}
		gather.Stop()
		batch = slices.DeleteFunc(batch, func(c commit) bool {
			if c.flushed != nil {
				markers = append(markers, c.flushed)
			}
			return c.flushed != nil
		})
		if err := s.put(batch); err != nil {
			s.m.writeErrors.Inc()
			s.logger.Error("write delivery ids: they are not remembered after a restart", "ids", len(batch), "error", err)
		}
		for _, m := range markers {
			close(m)
		}
	}
}

// put writes a group of commits in one transaction, then drops the expired
// entries and, past MaxEntries, those that expire first, from the file and
// from memory.
func (s *Store) put(batch []commit) error {
	if len(batch) == 0 {
		return nil
	}
	now := s.now().UnixMilli()
	s.mu.Lock()
	onDisk := s.onDisk
	s.mu.Unlock()
	type dropped struct {
		k       key
		expires int64
	}
	var drops []dropped
	evicted := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEntries)
		b.FillPercent = 0.9 // appended in order: fill the pages
		var fk [fileKey]byte
		for _, c := range batch {
			// Always a new key: a delivery is committed again only once
			// its previous entry has expired, so with a later expiry.
			binary.BigEndian.PutUint64(fk[:8], uint64(c.entry.expires))
			copy(fk[8:], c.key[:])
			if err := b.Put(fk[:], c.entry.event[:]); err != nil {
				return err
			}
			onDisk++
		}
		cur := b.Cursor()
		for k, _ := cur.First(); k != nil; k, _ = cur.First() {
			var expires int64
			if len(k) == fileKey {
				expires = int64(binary.BigEndian.Uint64(k))
			}
			over := onDisk > s.cfg.MaxEntries
			if !over && expires > now {
				break
			}
			if len(k) == fileKey {
				drops = append(drops, dropped{key(k[8:]), expires})
			}
			if err := cur.Delete(); err != nil {
				return err
			}
			onDisk--
			if expires > now {
				evicted++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.onDisk = onDisk
	for _, d := range drops {
		if e, ok := s.entries[d.k]; ok && e.expires == d.expires {
			delete(s.entries, d.k)
		}
	}
	s.mu.Unlock()
	s.m.evicted.Add(float64(evicted))
	return nil
}

// flush waits until the commits queued so far are written.
func (s *Store) flush() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.senders.Add(1)
	s.mu.Unlock()
	done := make(chan struct{})
	s.queue <- commit{flushed: done}
	s.senders.Done()
	<-done
}

// Len returns the number of remembered delivery ids.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Close writes the queued commits and closes the file. Claims still in
// progress are not remembered (their Commit logs a warning). Close on a
// store that is not open does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.senders.Wait()
	close(s.queue)
	<-s.written
	s.mu.Lock()
	db := s.db
	s.entries, s.inflight = nil, nil
	s.mu.Unlock()
	if err := db.Close(); err != nil {
		return fmt.Errorf("close dedupe file: %w", err)
	}
	return nil
}

// parseUUID parses the text form of a UUID.
func parseUUID(s string) ([eventLen]byte, bool) {
	var u [eventLen]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	var h [32]byte
	copy(h[0:8], s[0:8])
	copy(h[8:12], s[9:13])
	copy(h[12:16], s[14:18])
	copy(h[16:20], s[19:23])
	copy(h[20:32], s[24:36])
	if _, err := hex.Decode(u[:], h[:]); err != nil {
		return u, false
	}
	return u, true
}

// formatUUID returns the text form of a UUID, lower case.
func formatUUID(u [eventLen]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}
