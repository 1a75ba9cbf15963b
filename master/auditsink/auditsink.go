// Package auditsink appends a master's audit records to a JSON-lines
// file, one record per line, for shipping to a SIEM (docs/decisions.md
// decision 61, docs/operations.md "Audit log").
//
// Every master writes its own copy: the records are part of the
// replicated state, so each node's file holds the same records. The sink
// remembers the sequence number of the last record it wrote in a position
// file (in the master's data dir): after a restart it goes on from there,
// also with the records applied while it was down (as long as the state
// still keeps them), and a rotated file does not make it write again what
// it wrote before. Reopen (SIGHUP) closes the file and opens the path
// again, for rotation by renaming; rotation by copytruncate needs
// nothing, since the file is opened for appending.
package auditsink

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/store"
)

// Source is the audit log the sink copies. *store.Store implements it.
type Source interface {
	AuditAfter(after uint64, limit int) ([]audit.Record, error)
	WaitAudit(ctx context.Context, after uint64) error
}

var _ Source = (*store.Store)(nil)

// Config says where the sink writes.
type Config struct {
	// Path is the JSON-lines file (created with mode 0600).
	Path string
	// PosPath is the position file: the sequence number of the last
	// record written.
	PosPath string
}

// batch is how many records the sink reads at once.
const batch = 1000

// retryWait is how long the sink waits after a failure (an unopened
// store, a write error) before it tries again.
const retryWait = time.Second

// Sink copies the audit log to a file.
type Sink struct {
	cfg    Config
	src    Source
	logger *slog.Logger

	mu      sync.Mutex
	reopen  bool
	cancelW context.CancelFunc // ends the current wait, if any
}

// New returns a sink; it opens nothing until Run.
func New(cfg Config, src Source, logger *slog.Logger) (*Sink, error) {
	if cfg.Path == "" || cfg.PosPath == "" {
		return nil, errors.New("audit sink: a file and a position file are needed")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{cfg: cfg, src: src, logger: logger.With("component", "audit_sink")}, nil
}

// Reopen asks Run to close the file and open its path again (after the
// file was renamed by a log rotation).
func (s *Sink) Reopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reopen = true
	if s.cancelW != nil {
		s.cancelW()
	}
}

// Run writes the records the source holds beyond the position file's,
// then each new one, until ctx ends or the source closes.
func (s *Sink) Run(ctx context.Context) error {
	pos, err := readPos(s.cfg.PosPath)
	if err != nil {
		return err
	}
	f, err := openFile(s.cfg.Path)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			if err := f.Close(); err != nil {
				s.logger.Error("close the audit log file", "path", s.cfg.Path, "error", err)
			}
		}
	}()
	for ctx.Err() == nil {
		if s.takeReopen() {
			if err := f.Close(); err != nil {
				s.logger.Error("close the audit log file", "path", s.cfg.Path, "error", err)
			}
			f = nil
			if f, err = openFile(s.cfg.Path); err != nil {
				return err
			}
			s.logger.Info("audit log file reopened", "path", s.cfg.Path)
		}
		recs, err := s.src.AuditAfter(pos, batch)
		if errors.Is(err, store.ErrClosed) {
			return nil
		}
		if err == nil && len(recs) > 0 {
			if pos > 0 && recs[0].Seq > pos+1 {
				s.logger.Warn("audit records were pruned before the sink wrote them", "from", pos+1, "to", recs[0].Seq-1)
			}
			err = s.write(f, recs)
			if err == nil {
				pos = recs[len(recs)-1].Seq
				err = writePos(s.cfg.PosPath, pos)
			}
		}
		if err != nil {
			if !errors.Is(err, store.ErrNotOpen) {
				s.logger.Error("audit sink", "path", s.cfg.Path, "error", err)
			}
			sleep.For(ctx, retryWait)
			continue
		}
		if len(recs) == batch {
			continue
		}
		if err := s.wait(ctx, pos); err != nil {
			if errors.Is(err, store.ErrClosed) {
				return nil
			}
			sleep.For(ctx, retryWait)
		}
	}
	return nil
}

// wait waits for a record after pos, a reopen or ctx's end.
func (s *Sink) wait(ctx context.Context, pos uint64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.reopen {
		s.mu.Unlock()
		return nil
	}
	s.cancelW = cancel
	s.mu.Unlock()
	err := s.src.WaitAudit(wctx, pos)
	s.mu.Lock()
	s.cancelW = nil
	s.mu.Unlock()
	return err
}

func (s *Sink) takeReopen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reopen
	s.reopen = false
	return r
}

// write appends recs to f, one JSON line each.
func (s *Sink) write(f *os.File, recs []audit.Record) error {
	w := bufio.NewWriter(f)
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", s.cfg.Path, err)
	}
	return nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit sink: %w", err)
	}
	return f, nil
}

// readPos reads the position file (0 when there is none).
func readPos(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("audit sink: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("audit sink: position file %s: %w", path, err)
	}
	return n, nil
}

// writePos records pos, replacing the position file whole.
func writePos(path string, pos uint64) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(pos, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("position file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("position file: %w", err)
	}
	return nil
}

// PosPath returns the position file of a sink in the data dir dataDir.
func PosPath(dataDir string) string { return filepath.Join(dataDir, "audit-log.pos") }
