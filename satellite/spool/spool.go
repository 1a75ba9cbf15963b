package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Errors of the spool. Match them with [errors.Is].
var (
	// ErrFull reports an Append that would make the spool larger than
	// Config.MaxBytes.
	ErrFull = errors.New("spool full")
	// ErrClosed reports a call on a spool that is not open.
	ErrClosed = errors.New("spool closed")
	// ErrLocked reports a spool directory that another process has open.
	ErrLocked = errors.New("spool directory in use by another process")
	// ErrTooLarge reports a record larger than MaxRecordBytes or than the
	// whole spool.
	ErrTooLarge = errors.New("record too large for the spool")
	// ErrCorrupt reports a frame that fails its checks while being read
	// back (damage on disk after the spool was opened).
	ErrCorrupt = errors.New("spool corrupt")
)

// Defaults of [Config].
const (
	DefaultMaxBytes     = 1 << 30
	DefaultSegmentBytes = 64 << 20
)

// Config configures a [Spool].
type Config struct {
	// Dir is the spool directory; it is created if needed. Required.
	Dir string
	// MaxBytes bounds the total size of the segment files (default
	// DefaultMaxBytes, 1 GiB).
	MaxBytes int64
	// SegmentBytes is the size at which a new segment file is started
	// (default DefaultSegmentBytes, 64 MiB, but at most MaxBytes/4).
	SegmentBytes int64
}

// DefaultConfig returns the default configuration, without a directory.
func DefaultConfig() Config {
	return Config{MaxBytes: DefaultMaxBytes, SegmentBytes: DefaultSegmentBytes}
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: required"))
	}
	if c.MaxBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("max_bytes: %d is less than 4 KiB", c.MaxBytes))
	}
	if c.SegmentBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("segment_bytes: %d is less than 1 KiB", c.SegmentBytes))
	}
	return errors.Join(errs...)
}

// Entry is one record read from the spool.
type Entry struct {
	// Payload is the record as appended.
	Payload []byte
	// Next is the position just after the record.
	Next Position

	size int64 // frame size, header included
}

// Stats describes the content of the spool.
type Stats struct {
	// Records is the number of records not yet committed.
	Records int64
	// Bytes is the size of those records, frame headers included.
	Bytes int64
	// DiskBytes is the size of the segment files, which MaxBytes bounds.
	DiskBytes int64
	// MaxBytes is Config.MaxBytes.
	MaxBytes int64
}

// segment is one segment file.
type segment struct {
	id   uint64
	size int64 // bytes of header and whole frames
}

// Spool is a durable, bounded, append-only queue of records on disk. Build
// it with [New], then [Spool.Open] it; see the package documentation.
type Spool struct {
	cfg    Config
	logger *slog.Logger
	m      *metrics
	notify chan struct{}

	// syncMu serializes fsyncs of the active segment, segment rolls and
	// Close, so that no roll closes a file an fsync is using. It is taken
	// before mu.
	syncMu sync.Mutex

	mu      sync.Mutex
	open    bool
	failed  error // sticky: a write or fsync failed, the file state is unknown
	lock    *os.File
	posFile *os.File
	segs    []*segment // in id order; the last one is active
	active  *os.File   // write handle of the active segment
	synced  int64      // durable size of the active segment
	read    Position   // next record to read (committed position)
	records int64      // records after read
	bytes   int64      // their size
	disk    int64      // sum of the segment sizes

	// Reader state, owned by the consumer goroutine.
	rf   *os.File
	rfID uint64
}

// New validates cfg and builds a closed Spool whose metrics are registered
// with reg (nil registers nothing). It touches no file; call [Spool.Open].
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Spool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("spool config: %w", err)
	}
	cfg.SegmentBytes = min(cfg.SegmentBytes, max(cfg.MaxBytes/4, 1<<10))
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Spool{
		cfg:    cfg,
		logger: logger.With("component", "spool"),
		notify: make(chan struct{}, 1),
	}
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Open creates or recovers the spool in Config.Dir: it takes the directory
// lock, reads the read position, checks every segment from there on, and cuts
// a torn write from the end of a segment. Records committed before are
// skipped; the others are read again.
func (s *Spool) Open(ctx context.Context) (err error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		return errors.New("spool already open")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := s.cfg.Dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create spool directory: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.closeFiles()
			lock.Close()
		}
	}()
	s.failed = nil
	s.segs, s.disk, s.records, s.bytes = nil, 0, 0, 0

	s.posFile, err = os.OpenFile(filepath.Join(dir, positionFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open position: %w", err)
	}
	pos, havePos, err := readPosition(s.posFile)
	if err != nil {
		return err
	}

	ids, err := listSegments(dir)
	if err != nil {
		return err
	}
	if havePos {
		// Segments before the position were delivered; a crash came
		// between the commit and their removal.
		for len(ids) > 0 && ids[0] < pos.Segment {
			if err := os.Remove(filepath.Join(dir, segmentName(ids[0]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove delivered segment: %w", err)
			}
			ids = ids[1:]
		}
	}
	if len(ids) == 0 || !havePos || ids[0] != pos.Segment {
		// No position, or its segment was rolled and removed: start at
		// the first segment there is.
		pos = Position{Offset: headerLen}
		if len(ids) > 0 {
			pos.Segment = ids[0]
		}
	}

	for i, id := range ids {
		if pos.Segment == 0 {
			pos.Segment = id // the position's segment was set aside
		}
		seg, err := s.recoverSegment(id, &pos, i == len(ids)-1)
		if err != nil {
			return err
		}
		if seg == nil {
			if id == pos.Segment {
				pos = Position{Offset: headerLen}
			}
			continue
		}
		s.segs = append(s.segs, seg)
		s.disk += seg.size
	}

	if len(s.segs) == 0 {
		id := max(pos.Segment, 1)
		if len(ids) > 0 {
			id = max(id, ids[len(ids)-1]+1)
		}
		f, err := createSegment(dir, id)
		if err != nil {
			return err
		}
		s.segs = []*segment{{id: id, size: headerLen}}
		s.disk = headerLen
		s.active = f
		pos = Position{Segment: id, Offset: headerLen}
	} else {
		act := s.segs[len(s.segs)-1]
		s.active, err = os.OpenFile(filepath.Join(dir, segmentName(act.id)), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open active segment: %w", err)
		}
		if err := s.active.Sync(); err != nil {
			return fmt.Errorf("sync active segment: %w", err)
		}
	}
	s.synced = s.segs[len(s.segs)-1].size
	s.read = pos
	s.lock = lock
	s.open = true
	if s.records > 0 {
		s.signal()
	}
	s.logger.Info("spool opened", "dir", dir, "records", s.records, "bytes", s.bytes,
		"segments", len(s.segs), "disk_bytes", s.disk)
	return nil
}

// recoverSegment checks segment id, cuts a torn tail, and counts the records
// at or after *pos, which it moves to the start of the segment when it is
// not on a record boundary. It returns nil for a segment set aside as
// damaged.
func (s *Spool) recoverSegment(id uint64, pos *Position, last bool) (*segment, error) {
	path := filepath.Join(s.cfg.Dir, segmentName(id))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat segment: %w", err)
	}
	from := headerLen
	switch {
	case id == pos.Segment:
		from = pos.Offset
	case id < pos.Segment:
		from = info.Size() + 1 // count nothing
	}
	res, err := scanSegment(f, info.Size(), from)
	if errors.Is(err, errBadHeader) {
		if last && info.Size() <= headerLen {
			// Created but its header never made it to disk: rewrite it.
			if err := f.Truncate(0); err != nil {
				return nil, fmt.Errorf("reset segment: %w", err)
			}
			if _, err := f.WriteAt([]byte(segmentMagic), 0); err != nil {
				return nil, fmt.Errorf("reset segment: %w", err)
			}
			if err := f.Sync(); err != nil {
				return nil, fmt.Errorf("reset segment: %w", err)
			}
			if id == pos.Segment {
				pos.Offset = headerLen
			}
			return &segment{id: id, size: headerLen}, nil
		}
		s.m.corrupt.Inc()
		s.logger.Error("spool segment has a damaged header; set aside", "segment", path, "size", info.Size())
		if err := os.Rename(path, path+".corrupt"); err != nil {
			return nil, fmt.Errorf("set aside damaged segment: %w", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if id == pos.Segment && !res.boundary {
		// The position is not on a frame boundary: read the segment from
		// its start again (duplicates rather than loss).
		s.logger.Warn("spool position not on a record boundary; reading the segment again",
			"segment", path, "offset", pos.Offset)
		pos.Offset = headerLen
		res, err = scanSegment(f, info.Size(), headerLen)
		if err != nil {
			return nil, err
		}
	}
	if res.end < info.Size() {
		torn := info.Size() - res.end
		s.m.truncated.Add(float64(torn))
		s.logger.Warn("spool segment ends with a torn write; truncated",
			"segment", path, "size", info.Size(), "kept", res.end, "cut_bytes", torn)
		if err := f.Truncate(res.end); err != nil {
			return nil, fmt.Errorf("truncate torn segment: %w", err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync truncated segment: %w", err)
		}
	}
	s.records += res.records
	s.bytes += res.bytes
	return &segment{id: id, size: res.end}, nil
}

// listSegments returns the ids of the segment files of dir, in order.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read spool directory: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		if id, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// usable reports why the spool cannot take writes, if it cannot. mu is held.
func (s *Spool) usable() error {
	if !s.open {
		return ErrClosed
	}
	return s.failed
}

// Append writes payload as one record and returns once it is durable. It
// returns [ErrFull] when the spool has no room for it. Append is safe for
// concurrent use; concurrent appends share fsyncs.
func (s *Spool) Append(ctx context.Context, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := int64(frameHeaderLen + len(payload))
	if len(payload) > MaxRecordBytes || n+headerLen > s.cfg.MaxBytes {
		return ErrTooLarge
	}
	frame := appendFrame(make([]byte, 0, n), payload)

	s.mu.Lock()
	var act *segment
	for {
		if err := s.usable(); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.disk+n > s.cfg.MaxBytes {
			s.mu.Unlock()
			s.m.full.Inc()
			return ErrFull
		}
		act = s.segs[len(s.segs)-1]
		if act.size == headerLen || act.size+n <= s.cfg.SegmentBytes {
			break
		}
		// Roll: that needs syncMu, which comes before mu.
		s.mu.Unlock()
		s.syncMu.Lock()
		s.mu.Lock()
		var err error
		if s.usable() == nil {
			if a := s.segs[len(s.segs)-1]; a.size > headerLen && a.size+n > s.cfg.SegmentBytes {
				err = s.roll()
			}
		}
		s.syncMu.Unlock()
		if err != nil {
			s.mu.Unlock()
			return err
		}
	}
	off := act.size
	if _, err := s.active.WriteAt(frame, off); err != nil {
		if terr := s.active.Truncate(off); terr != nil {
			s.failed = fmt.Errorf("spool write failed and could not be undone: %w", errors.Join(err, terr))
		}
		s.mu.Unlock()
		return fmt.Errorf("spool append: %w", err)
	}
	act.size += n
	s.disk += n
	s.records++
	s.bytes += n
	target := Position{Segment: act.id, Offset: act.size}
	s.mu.Unlock()

	if err := s.syncTo(target); err != nil {
		return err
	}
	s.m.appended.Inc()
	s.signal()
	return nil
}

// syncTo returns once the active segment is durable up to target. The
// appenders waiting behind one fsync are all covered by the next one.
func (s *Spool) syncTo(target Position) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	act := s.segs[len(s.segs)-1]
	if target.Segment < act.id || s.synced >= target.Offset {
		s.mu.Unlock() // a roll or another appender's fsync covered it
		return nil
	}
	f, upto := s.active, act.size
	s.mu.Unlock()

	start := time.Now()
	err := f.Sync()
	s.m.fsync.Observe(time.Since(start).Seconds())

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed = fmt.Errorf("spool fsync: %w", err)
		return s.failed
	}
	s.synced = upto // no roll ran: it needs syncMu
	return nil
}

// roll seals the active segment and starts the next one. syncMu and mu are
// held. A failure leaves the spool failed.
func (s *Spool) roll() error {
	act := s.segs[len(s.segs)-1]
	if err := s.active.Sync(); err != nil {
		s.failed = fmt.Errorf("spool fsync: %w", err)
		return s.failed
	}
	s.synced = act.size
	f, err := createSegment(s.cfg.Dir, act.id+1)
	if err != nil {
		s.failed = err
		return err
	}
	if err := s.active.Close(); err != nil {
		s.logger.Warn("close sealed segment", "error", err)
	}
	s.active = f
	s.segs = append(s.segs, &segment{id: act.id + 1, size: headerLen})
	s.disk += headerLen
	s.synced = headerLen
	return nil
}

// signal tells the consumer that records may be waiting.
func (s *Spool) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Notify returns a channel that receives a value after records were
// appended (and when Open found records). Several appends may be signalled
// by one value.
func (s *Spool) Notify() <-chan struct{} { return s.notify }

// Stats returns the current content of the spool.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Records: s.records, Bytes: s.bytes, DiskBytes: s.disk, MaxBytes: s.cfg.MaxBytes}
}

// Read returns up to maxRecords durable records from the read position on,
// stopping before maxBytes of payload unless the first record alone is
// larger. It does not move the read position: the same records are read
// again until they are committed. An empty result means that the spool
// holds nothing unread.
func (s *Spool) Read(ctx context.Context, maxRecords, maxBytes int) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if !s.open {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	pos := s.read
	s.mu.Unlock()

	var out []Entry
	total := 0
	for len(out) < maxRecords {
		s.mu.Lock()
		end, next, ok := s.bounds(pos.Segment)
		s.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: segment %d is gone", ErrCorrupt, pos.Segment)
		}
		if pos.Offset >= end {
			if next == 0 {
				break // at the end of the active segment
			}
			pos = Position{Segment: next, Offset: headerLen}
			continue
		}
		f, err := s.reader(pos.Segment)
		if err != nil {
			return nil, err
		}
		payload, err := readFrame(f, pos.Offset, end)
		if err != nil {
			return nil, fmt.Errorf("read spool segment %d: %w", pos.Segment, err)
		}
		if len(out) > 0 && total+len(payload) > maxBytes {
			break
		}
		size := int64(frameHeaderLen + len(payload))
		pos.Offset += size
		out = append(out, Entry{Payload: payload, Next: pos, size: size})
		total += len(payload)
	}
	return out, nil
}

// bounds returns the readable end of segment id and the id of the segment
// after it (0 for the active one). mu is held.
func (s *Spool) bounds(id uint64) (end int64, next uint64, ok bool) {
	for i, seg := range s.segs {
		if seg.id != id {
			continue
		}
		if i == len(s.segs)-1 {
			return s.synced, 0, true
		}
		return seg.size, s.segs[i+1].id, true
	}
	return 0, 0, false
}

// reader returns a read handle on segment id.
func (s *Spool) reader(id uint64) (*os.File, error) {
	if s.rf != nil && s.rfID == id {
		return s.rf, nil
	}
	if s.rf != nil {
		s.rf.Close()
		s.rf = nil
	}
	f, err := os.Open(filepath.Join(s.cfg.Dir, segmentName(id)))
	if err != nil {
		return nil, fmt.Errorf("open segment for reading: %w", err)
	}
	s.rf, s.rfID = f, id
	return f, nil
}

// Commit marks entries, the next records from the read position on as
// returned by Read, as delivered: the read position moves past the last one
// durably, and segment files that hold nothing unread any more are removed.
func (s *Spool) Commit(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	pos := entries[len(entries)-1].Next
	var size int64
	for _, e := range entries {
		size += e.size
	}

	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return ErrClosed
	}
	if err := writePosition(s.posFile, pos); err != nil {
		return err
	}
	s.read = pos
	s.records -= int64(len(entries))
	s.bytes -= size
	s.m.committed.Add(float64(len(entries)))

	// A segment read to its end is done with: move on to the next one, or,
	// for the active segment, start a new one so that the old can go.
	if end, next, _ := s.bounds(pos.Segment); pos.Offset >= end {
		switch {
		case next != 0:
			s.read = Position{Segment: next, Offset: headerLen}
		case s.failed == nil && end > headerLen && end == s.segs[len(s.segs)-1].size:
			if err := s.roll(); err != nil {
				return err
			}
			s.read = Position{Segment: s.segs[len(s.segs)-1].id, Offset: headerLen}
		}
	}
	for len(s.segs) > 1 && s.segs[0].id < s.read.Segment {
		seg := s.segs[0]
		if s.rf != nil && s.rfID == seg.id {
			s.rf.Close()
			s.rf = nil
		}
		if err := os.Remove(filepath.Join(s.cfg.Dir, segmentName(seg.id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove delivered segment: %w", err)
		}
		s.disk -= seg.size
		s.segs = s.segs[1:]
	}
	return nil
}

// Quarantine appends payload, a record the consumer can never deliver, to
// rejected.log in the spool directory and makes it durable. The caller then
// commits the record as usual.
func (s *Spool) Quarantine(ctx context.Context, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path := filepath.Join(s.cfg.Dir, rejectedFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", rejectedFile, err)
	}
	info, err := f.Stat()
	if err == nil && info.Size() == 0 {
		_, err = f.Write([]byte(segmentMagic))
	}
	if err == nil {
		_, err = f.Write(appendFrame(nil, payload))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("quarantine record: %w", err)
	}
	s.m.quarantined.Inc()
	return nil
}

// Close makes everything durable, closes the files and releases the
// directory lock. The spool can be opened again.
func (s *Spool) Close() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return nil
	}
	s.open = false
	var errs []error
	if s.active != nil && s.failed == nil {
		if err := s.active.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync active segment: %w", err))
		}
	}
	errs = append(errs, s.closeFiles())
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}

// closeFiles closes the segment and position files. mu is held.
func (s *Spool) closeFiles() error {
	var errs []error
	for _, f := range []**os.File{&s.active, &s.posFile, &s.rf} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	return errors.Join(errs...)
}
