package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
)

// Defaults of [Config].
const (
	// DefaultMaxEntries bounds the remembered delivery ids: 250,000
	// entries take about 55 MB of pages, a file of at most about 128 MiB
	// with bbolt's free pages.
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

var (
	bucketKeys   = []byte("keys")   // key (32) → expiry ms (8) + event id
	bucketExpiry = []byte("expiry") // expiry ms (8) + key (32) → empty
)

// writeBatch bounds the commits written in one transaction.
const writeBatch = 1024

// Store remembers delivery ids. Build it with [New], then [Store.Open] it;
// [Store.Close] writes what is queued and closes the file.
type Store struct {
	cfg    Config
	logger *slog.Logger
	m      *metrics
	now    func() time.Time // the clock of expiry when writing

	mu       sync.Mutex
	db       *bolt.DB
	inflight map[[32]byte]*pending // claims in progress, commits not yet written
	closed   bool
	senders  sync.WaitGroup // Commits sending to queue
	queue    chan commit
	written  chan struct{} // closed when the writer has stopped
	count    int           // entries in the file
}

// pending is the outcome of a claim, shared with the calls waiting for it.
type pending struct {
	done    chan struct{} // closed once ok and eventID are set
	ok      bool
	eventID string
}

type commit struct {
	key     [32]byte
	eventID string
	expires time.Time
	p       *pending
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

// Open opens (or creates) the file, drops the entries expired at now, and
// starts the writer. A file that bbolt cannot read is set aside (renamed
// with a .corrupt suffix, logged) and a new one started: losing the window
// must not keep the satellite down.
func (s *Store) Open(ctx context.Context, now time.Time) error {
	db, err := openFile(s.cfg.Path)
	if err != nil && !errors.Is(err, bolt.ErrTimeout) && ctx.Err() == nil {
		aside := fmt.Sprintf("%s.corrupt-%d", s.cfg.Path, now.UnixMilli())
		if rerr := os.Rename(s.cfg.Path, aside); rerr == nil {
			s.logger.Error("dedupe file unreadable: set aside, the remembered delivery ids are lost", "path", s.cfg.Path, "moved_to", aside, "error", err)
			db, err = openFile(s.cfg.Path)
		}
	}
	if err != nil {
		return fmt.Errorf("open dedupe file: %w", err)
	}
	count := 0
	err = db.Update(func(tx *bolt.Tx) error {
		keys, err := tx.CreateBucketIfNotExists(bucketKeys)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketExpiry); err != nil {
			return err
		}
		count = keys.Stats().KeyN
		return nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("open dedupe file: %w", err), db.Close())
	}
	s.mu.Lock()
	s.db, s.count, s.closed = db, count, false
	s.inflight = make(map[[32]byte]*pending)
	s.queue = make(chan commit, writeBatch)
	s.written = make(chan struct{})
	s.mu.Unlock()
	// Expired entries go in bounded transactions before the first write.
	for {
		n, err := s.prune(now, writeBatch*8)
		if err != nil {
			return errors.Join(err, s.closeFile())
		}
		if n < writeBatch*8 {
			break
		}
	}
	go s.write()
	s.logger.Info("dedupe store opened", "path", s.cfg.Path, "entries", s.entries(), "max_entries", s.cfg.MaxEntries)
	return nil
}

func openFile(path string) (*bolt.DB, error) {
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
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
	key [32]byte
	p   *pending
}

// Key returns the store's key of a delivery: the SHA-256 of the webhook id
// and the delivery id.
func Key(webhookID, deliveryID string) [32]byte {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{0})
	h.Write([]byte(deliveryID))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Begin looks up the delivery deliveryID of webhook webhookID at time now.
// A duplicate is returned as such. Otherwise the caller owns the claim on
// the id and must end it with [Claim.Commit] or [Claim.Abort]; meanwhile,
// other Begins of the same id wait (until ctx ends).
func (s *Store) Begin(ctx context.Context, webhookID, deliveryID string, now time.Time) (*Claim, error) {
	key := Key(webhookID, deliveryID)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if p := s.inflight[key]; p != nil {
			s.mu.Unlock()
			select {
			case <-p.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("wait for a concurrent delivery with the same id: %w", ctx.Err())
			}
			if p.ok {
				return &Claim{Duplicate: true, EventID: p.eventID}, nil
			}
			continue // that call failed: try to claim it ourselves
		}
		p := &pending{done: make(chan struct{})}
		s.inflight[key] = p
		db := s.db
		s.mu.Unlock()

		eventID, found, err := lookup(db, key, now)
		if err != nil || found {
			// Settle the claim for the calls that waited on it.
			p.ok, p.eventID = found, eventID
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			close(p.done)
			if err != nil {
				return nil, err
			}
			return &Claim{Duplicate: true, EventID: eventID}, nil
		}
		return &Claim{s: s, key: key, p: p}, nil
	}
}

// lookup reads the entry of key, if it is still within its window at now.
func lookup(db *bolt.DB, key [32]byte, now time.Time) (eventID string, found bool, err error) {
	err = db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketKeys).Get(key[:])
		if len(v) < 8 {
			return nil
		}
		if int64(binary.BigEndian.Uint64(v)) <= now.UnixMilli() {
			return nil // expired, not yet pruned
		}
		eventID, found = string(v[8:]), true
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("read dedupe file: %w", err)
	}
	return eventID, found, nil
}

// Commit records that the delivery was accepted as event eventID, to be
// remembered until expires. The calls waiting on the claim get eventID at
// once; the entry is written to the file shortly after. Commit on a
// duplicate is a no-op.
func (c *Claim) Commit(eventID string, expires time.Time) {
	if c.p == nil {
		return
	}
	p := c.p
	c.p = nil
	p.ok, p.eventID = true, eventID
	close(p.done)
	s := c.s
	s.mu.Lock()
	if s.closed {
		delete(s.inflight, c.key)
		s.mu.Unlock()
		s.logger.Warn("delivery id committed after the dedupe store closed: not remembered")
		return
	}
	s.senders.Add(1)
	s.mu.Unlock()
	s.queue <- commit{key: c.key, eventID: eventID, expires: expires, p: p}
	s.senders.Done()
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
	batch := make([]commit, 0, writeBatch)
	for c := range s.queue {
		batch = append(batch[:0], c)
	more:
		for len(batch) < writeBatch {
			select {
			case c, ok := <-s.queue:
				if !ok {
					break more
				}
				batch = append(batch, c)
			default:
				break more
			}
		}
		var markers []chan struct{}
		batch = slices.DeleteFunc(batch, func(c commit) bool {
			if c.flushed != nil {
				markers = append(markers, c.flushed)
			}
			return c.flushed != nil
		})
		if err := s.put(batch); err != nil {
			s.m.writeErrors.Inc()
			s.logger.Error("write delivery ids: they are not remembered", "ids", len(batch), "error", err)
		}
		s.mu.Lock()
		for _, c := range batch {
			if s.inflight[c.key] == c.p {
				delete(s.inflight, c.key)
			}
		}
		s.mu.Unlock()
		for _, m := range markers {
			close(m)
		}
	}
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

// put writes a group of commits in one transaction, then drops expired
// entries and, past MaxEntries, those that expire first.
func (s *Store) put(batch []commit) error {
	if len(batch) == 0 {
		return nil
	}
	added, evicted, expired := 0, 0, 0
	now := s.now().UnixMilli()
	err := s.db.Update(func(tx *bolt.Tx) error {
		keys, exp := tx.Bucket(bucketKeys), tx.Bucket(bucketExpiry)
		var ik [40]byte
		for _, c := range batch {
			if old := keys.Get(c.key[:]); len(old) >= 8 {
				copy(ik[:8], old[:8])
				copy(ik[8:], c.key[:])
				if err := exp.Delete(ik[:]); err != nil {
					return err
				}
			} else {
				added++
			}
			v := make([]byte, 8, 8+len(c.eventID))
			binary.BigEndian.PutUint64(v, uint64(c.expires.UnixMilli()))
			v = append(v, c.eventID...)
			if err := keys.Put(c.key[:], v); err != nil {
				return err
			}
			binary.BigEndian.PutUint64(ik[:8], uint64(c.expires.UnixMilli()))
			copy(ik[8:], c.key[:])
			if err := exp.Put(ik[:], nil); err != nil {
				return err
			}
		}
		count := s.entries() + added
		cur := exp.Cursor()
		for k, _ := cur.First(); k != nil && len(k) == 40; k, _ = cur.First() {
			over := count > s.cfg.MaxEntries
			if !over && int64(binary.BigEndian.Uint64(k)) > now {
				break
			}
			if err := keys.Delete(k[8:]); err != nil {
				return err
			}
			if err := cur.Delete(); err != nil {
				return err
			}
			count--
			if over && int64(binary.BigEndian.Uint64(k)) > now {
				evicted++
			} else {
				expired++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.count += added - evicted - expired
	s.mu.Unlock()
	s.m.evicted.Add(float64(evicted))
	return nil
}

// prune drops at most limit entries expired at now and returns how many.
func (s *Store) prune(now time.Time, limit int) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		keys, exp := tx.Bucket(bucketKeys), tx.Bucket(bucketExpiry)
		cur := exp.Cursor()
		for k, _ := cur.First(); k != nil && n < limit; k, _ = cur.First() {
			if len(k) == 40 && int64(binary.BigEndian.Uint64(k)) > now.UnixMilli() {
				break
			}
			if len(k) == 40 {
				if err := keys.Delete(k[8:]); err != nil {
					return err
				}
			}
			if err := cur.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune dedupe file: %w", err)
	}
	s.mu.Lock()
	s.count -= n
	s.mu.Unlock()
	return n, nil
}

// entries returns the number of entries in the file.
func (s *Store) entries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// closeFile closes the file of a store whose writer has not started.
func (s *Store) closeFile() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.db.Close()
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
	s.inflight = nil
	s.mu.Unlock()
	if err := db.Close(); err != nil {
		return fmt.Errorf("close dedupe file: %w", err)
	}
	return nil
}
