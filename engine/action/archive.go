package action

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/encoding/json"

	"github.com/squallhq/squall/engine/tree"
)

// File modes of what the archive creates.
const (
	archiveDirMode  = 0o750
	archiveFileMode = 0o640
)

// archiveExecutor appends the payload's event, as one compact JSON line, to
// a file under the base directory. Every file operation goes through an
// os.Root opened on the base directory, so neither "..", nor an absolute
// path, nor a symbolic link can reach outside it. Files stay open in a
// bounded LRU cache; each has its own mutex, so a line is written by one
// write(2) while no other line of the same file is being written.
type archiveExecutor struct {
	basePath    string
	defaultPath *pathTemplate
	paths       map[string]*pathTemplate
	maxOpen     int
	ttl         time.Duration
	recentKeys  int // keys remembered per file; 0: lines carry no key
	log         *slog.Logger
	repeats     prometheus.Counter // lines not written again; nil: not counted

	bufs sync.Pool // *bytes.Buffer

	mu    sync.Mutex // guards what follows
	root  *os.Root   // opened on first use
	files map[string]*archiveFile
	lru   *list.List // of *archiveFile, most recently used first
	// closing are the files taken out of files and not closed yet, by
	// path: a write may still be going through one, so the path is not
	// opened again until it is closed (a new handle would read back the
	// write half done, as a line a crash cut short).
	closing map[string]*archiveFile
	closed  bool
}

// archiveFile is an open archive file.
type archiveFile struct {
	path   string
	opened time.Time
	elem   *list.Element

	mu     sync.Mutex // serializes writes and the close
	f      *os.File
	closed bool
	// found are the keys of the last lines other writers left in the
	// file (another process, or an earlier run of this one): read back
	// at open, and by every write from what was appended since; keys
	// are the keys of the lines this executor wrote. Each holds
	// recentKeys keys, so that this executor's writes never push out the
	// lines a crashed engine left, which the engine taking its work over
	// runs again. size is where the file ended after the last write or
	// read back; torn says the file ended without a newline then (a
	// write a crash cut short). Used only when recentKeys > 0.
	found, keys *recentKeys
	size        int64
	torn        bool
}

// keyedLine is where a line ends in a buffer of lines, and its key.
type keyedLine struct {
	end   int
	key   lineKey
	keyed bool
}

var (
	_ Executor  = (*archiveExecutor)(nil)
	_ io.Closer = (*archiveExecutor)(nil)
)

func newArchiveExecutor(cfg ArchiveConfig, log *slog.Logger) (*archiveExecutor, error) {
	a := &archiveExecutor{
		basePath:   cfg.BasePath,
		paths:      make(map[string]*pathTemplate, len(cfg.Paths)),
		maxOpen:    cfg.MaxOpenFiles,
		ttl:        time.Duration(cfg.FileTTL),
		recentKeys: cfg.RecentKeys,
		log:        log,
		files:      make(map[string]*archiveFile),
		closing:    make(map[string]*archiveFile),
		lru:        list.New(),
	}
	a.bufs.New = func() any { return new(bytes.Buffer) }
	var err error
	if a.defaultPath, err = parsePathTemplate(cfg.DefaultPath); err != nil {
		return nil, fmt.Errorf("archive.default_path: %w", err)
	}
	for k, v := range cfg.Paths {
		if a.paths[k], err = parsePathTemplate(v); err != nil {
			return nil, fmt.Errorf("archive.paths.%s: %w", k, err)
		}
	}
	return a, nil
}

// Execute appends the payload's event to its archive file.
func (a *archiveExecutor) Execute(ctx context.Context, act tree.Action) error {
	event, ok := act.Payload["event"]
	if !ok {
		return payloadError(IDArchive, "event", "is required")
	}
	tpl := a.defaultPath
	if typ, ok := act.Payload["archive_type"].(string); ok {
		if tpl, ok = a.paths[typ]; !ok {
			return payloadError(IDArchive, "archive_type", fmt.Sprintf("%q has no configured path", typ))
		}
	}
	path, err := tpl.resolve(act.Payload)
	if err != nil {
		return err
	}

	buf := a.bufs.Get().(*bytes.Buffer)
	defer a.putBuf(buf)
	buf.Reset()
	line, err := a.encode(buf, event, act)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return NewRetriable(fmt.Errorf("archive: %w", context.Cause(ctx)))
	}
	if wb := writeBatchFrom(ctx); wb != nil {
		wb.add(a, path, buf.Bytes(), line, act)
		return nil
	}
	line.end = buf.Len()
	return a.append(path, buf.Bytes(), []keyedLine{line})
}

// encode writes the event's line into buf and returns its key. With
// recentKeys, an object event of an action with an idempotency key is
// written with the key as its first field (ArchiveKeyField), unless the
// event has such a field of its own.
func (a *archiveExecutor) encode(buf *bytes.Buffer, event any, act tree.Action) (keyedLine, error) {
	var line keyedLine
	if m, ok := event.(map[string]any); ok && a.recentKeys > 0 && act.EventID != "" {
		if _, own := m[ArchiveKeyField]; !own {
			act.AppendIdempotencyKey(line.key[:0])
			line.keyed = true
			buf.WriteString(archiveKeyPrefix)
			buf.Write(line.key[:])
			buf.WriteByte('"')
		}
	}
	start := buf.Len()
	// segmentio/encoding writes what encoding/json writes (map keys
	// sorted, the same escapes) without reflection's allocations: 37
	// allocations per Tornado-sized event fewer.
	enc := json.NewEncoder(buf) // compact, and ends the line with "\n"
	enc.SetEscapeHTML(false)
	if err := enc.Encode(event); err != nil {
		return line, NewPermanent(fmt.Errorf("archive: encode event: %w", err))
	}
	if line.keyed {
		// The object's "{" becomes the separator after the key, or goes
		// away when the object is empty.
		b := buf.Bytes()
		if b[start+1] == '}' {
			copy(b[start:], b[start+1:])
			buf.Truncate(buf.Len() - 1)
		} else {
			b[start] = ','
		}
	}
	return line, nil
}

func (a *archiveExecutor) putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 { // do not keep huge buffers alive
		a.bufs.Put(b)
	}
}

// append writes buf, lines ending at lines[i].end, to the file at path
// (relative to the base directory), leaving out the lines whose key is
// among the last lines found in the file or written to it (fresh).
func (a *archiveExecutor) append(path string, buf []byte, lines []keyedLine) error {
	for {
		f, err := a.acquire(path)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if f.closed { // evicted between acquire and lock: take a fresh one
			f.mu.Unlock()
			continue
		}
		err = a.write(f, buf, lines)
		f.mu.Unlock()
		if err != nil {
			a.drop(f)
			return classifyIOError(fmt.Errorf("archive: write %s: %w", path, err))
		}
		return nil
	}
}

// write writes the lines to f. The caller holds f.mu.
func (a *archiveExecutor) write(f *archiveFile, buf []byte, lines []keyedLine) (err error) {
	if f.keys == nil {
		_, err := f.f.Write(buf)
		return err
	}
	if err = f.catchUp(a.recentKeys); err != nil {
		return err
	}
	out, repeats := f.fresh(buf, lines, a.recentKeys)
	if repeats > 0 && a.repeats != nil {
		defer func() {
			if err == nil {
				a.repeats.Add(float64(repeats))
			}
		}()
	}
	if len(out) == 0 {
		return nil
	}
	if f.torn { // end the cut line first, so that ours stays whole
		if _, err = f.f.Write([]byte{'\n'}); err != nil {
			return err
		}
		f.size++
		f.torn = false
	}
	n, err := f.f.Write(out)
	f.size += int64(n)
	return err
}

// fresh returns the lines of buf whose key f does not hold (nor an earlier
// line of buf), and how many it left out, and remembers their keys: a
// write that fails then drops the file (drop), whose next open reads the
// keys back from what the file holds. The caller holds f.mu.
func (f *archiveFile) fresh(buf []byte, lines []keyedLine, size int) ([]byte, int) {
	var out []byte // nil until the first repeat
	repeats, start := 0, 0
	for _, l := range lines {
		if l.keyed && (f.found.has(l.key) || !f.keys.add(l.key, size)) {
			repeats++
			if out == nil {
				out = append(make([]byte, 0, len(buf)), buf[:start]...)
			}
		} else if out != nil {
			out = append(out, buf[start:l.end]...)
		}
		start = l.end
	}
	if out == nil {
		return buf, 0
	}
	return out, repeats
}

// acquire returns the open file for path, opening it (and evicting the least
// recently used file beyond the bound) when needed. A file of path taken
// out of the cache and not closed yet is closed first, after the write
// going through it.
func (a *archiveExecutor) acquire(path string) (*archiveFile, error) {
	for {
		f, pending, err := a.acquireOpen(path)
		if pending == nil {
			return f, err
		}
		a.closeFiles([]*archiveFile{pending})
	}
}

// acquireOpen is acquire without the wait: it returns the file of path
// still closing, if any, instead of opening path again.
func (a *archiveExecutor) acquireOpen(path string) (_ *archiveFile, pending *archiveFile, _ error) {
	var victims []*archiveFile
	defer func() { a.closeFiles(victims) }()

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, NewPermanent(fmt.Errorf("archive: %w", ErrClosed))
	}
	now := time.Now()
	if f, ok := a.files[path]; ok {
		if now.Sub(f.opened) < a.ttl {
			a.lru.MoveToFront(f.elem)
			return f, nil, nil
		}
		a.remove(f)
		victims = append(victims, f)
	}
	if c, ok := a.closing[path]; ok {
		return nil, c, nil
	}
	if a.root == nil {
		if err := os.MkdirAll(a.basePath, archiveDirMode); err != nil {
			return nil, nil, classifyIOError(fmt.Errorf("archive: create base directory: %w", err))
		}
		root, err := os.OpenRoot(a.basePath)
		if err != nil {
			return nil, nil, classifyIOError(fmt.Errorf("archive: open base directory: %w", err))
		}
		a.root = root
	}
	osf, err := a.open(path)
	if err != nil {
		return nil, nil, err
	}
	f := &archiveFile{path: path, opened: now, f: osf}
	if a.recentKeys > 0 {
		f.found, f.keys = newRecentKeys(a.recentKeys), newRecentKeys(a.recentKeys)
		if err := f.recover(a.recentKeys); err != nil {
			if cerr := osf.Close(); cerr != nil {
				a.log.Warn("archive: close file", logKeyPath, path, logKeyError, cerr.Error())
			}
			return nil, nil, classifyIOError(fmt.Errorf("archive: open %s: %w", path, err))
		}
	}
	f.elem = a.lru.PushFront(f)
	a.files[path] = f
	for a.lru.Len() > a.maxOpen {
		old := a.lru.Back().Value.(*archiveFile)
		a.remove(old)
		victims = append(victims, old)
	}
	return f, nil, nil
}

// open opens path for appending inside the root, creating its parent
// directories when they are missing. The caller holds a.mu.
func (a *archiveExecutor) open(path string) (*os.File, error) {
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE
	if a.recentKeys > 0 { // the last lines are read back
		flags = os.O_RDWR | os.O_APPEND | os.O_CREATE
	}
	f, err := a.root.OpenFile(path, flags, archiveFileMode)
	if errors.Is(err, fs.ErrNotExist) {
		if dir := filepath.Dir(path); dir != "." {
			if err := a.root.MkdirAll(dir, archiveDirMode); err != nil {
				if escapesRoot(err) {
					return nil, NewPermanent(fmt.Errorf("archive: create directory of %s: %w: %w", path, ErrPathEscape, err))
				}
				return nil, classifyIOError(fmt.Errorf("archive: create directory of %s: %w", path, err))
			}
		}
		f, err = a.root.OpenFile(path, flags, archiveFileMode)
	}
	if err != nil {
		if escapesRoot(err) {
			return nil, NewPermanent(fmt.Errorf("archive: open %s: %w: %w", path, ErrPathEscape, err))
		}
		return nil, classifyIOError(fmt.Errorf("archive: open %s: %w", path, err))
	}
	return f, nil
}

// escapesRoot reports whether an os.Root refused a path that leads out of
// it (through a symbolic link). The os package does not export that error,
// so its text is matched; if it ever changes, the error stays permanent and
// only loses its ErrPathEscape tag (a test watches this).
func escapesRoot(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

// remove takes f out of the cache; it is closing until closeFiles closes
// it. The caller holds a.mu.
func (a *archiveExecutor) remove(f *archiveFile) {
	if cur, ok := a.files[f.path]; ok && cur == f {
		delete(a.files, f.path)
		a.lru.Remove(f.elem)
		a.closing[f.path] = f
	}
}

// drop takes a file whose write failed out of the cache and closes it, so
// that the next write reopens it.
func (a *archiveExecutor) drop(f *archiveFile) {
	a.mu.Lock()
	a.remove(f)
	a.mu.Unlock()
	a.closeFiles([]*archiveFile{f})
}

// closeFiles closes files taken out of the cache, after their in-flight
// write, and returns the close errors.
func (a *archiveExecutor) closeFiles(files []*archiveFile) error {
	var errs []error
	for _, f := range files {
		f.mu.Lock()
		if !f.closed {
			f.closed = true
			if err := f.f.Close(); err != nil {
				a.log.Warn("archive: close file", logKeyPath, f.path, logKeyError, err.Error())
				errs = append(errs, err)
			}
		}
		f.mu.Unlock()
		a.mu.Lock()
		if a.closing[f.path] == f {
			delete(a.closing, f.path)
		}
		a.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Close closes every open file and the base directory. Later actions fail
// with ErrClosed.
func (a *archiveExecutor) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	files := make([]*archiveFile, 0, len(a.files))
	for _, f := range a.files {
		files = append(files, f)
	}
	clear(a.files)
	a.lru.Init()
	root := a.root
	a.mu.Unlock()

	err := a.closeFiles(files)
	if root != nil {
		err = errors.Join(err, root.Close())
	}
	if err != nil {
		return fmt.Errorf("archive: close: %w", err)
	}
	return nil
}

// classifyIOError marks err retriable when the operating system reports a
// condition that may clear up (disk full, too many open files, I/O error),
// else permanent (permission denied, a path escaping the root, a directory
// where a file should be).
func classifyIOError(err error) error {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE,
		syscall.ENFILE, syscall.EIO, syscall.EAGAIN, syscall.EINTR, syscall.EBUSY} {
		if errors.Is(err, errno) {
			return NewRetriable(err)
		}
	}
	return NewPermanent(err)
}

// pathTemplate is a parsed archive path template.
type pathTemplate struct {
	text  string
	parts []templatePart
}

// templatePart is literal text, or a ${param} when param is set.
type templatePart struct {
	text  string
	param string
}

// parsePathTemplate parses an archive path template: text with ${name}
// placeholders, relative to the base directory (a leading "/" is dropped).
// The template itself must be a local path without "..".
func parsePathTemplate(s string) (*pathTemplate, error) {
	rel := strings.TrimLeft(s, "/")
	t := &pathTemplate{text: rel}
	rest := rel
	for rest != "" {
		i := strings.Index(rest, "${")
		if i < 0 {
			t.parts = append(t.parts, templatePart{text: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{text: rest[:i]})
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%q: unterminated ${", s)
		}
		name := rest[i+2 : i+end]
		if name == "" || strings.Contains(name, "${") {
			return nil, fmt.Errorf("%q: invalid parameter ${%s}", s, name)
		}
		t.parts = append(t.parts, templatePart{param: name})
		rest = rest[i+end+1:]
	}
	// Check the shape with every parameter standing for one plain name.
	var b strings.Builder
	for _, p := range t.parts {
		if p.param != "" {
			b.WriteString("p")
		} else {
			b.WriteString(p.text)
		}
	}
	if err := checkLocal(b.String()); err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return t, nil
}

// resolve fills the template with the payload's top-level string fields and
// checks that the result stays inside the base directory.
func (t *pathTemplate) resolve(payload map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.param == "" {
			b.WriteString(p.text)
			continue
		}
		v, ok := payload[p.param].(string)
		if !ok {
			return "", payloadError(IDArchive, p.param,
				fmt.Sprintf("is needed as a string by the path %q", t.text))
		}
		b.WriteString(v)
	}
	path := b.String()
	if err := checkLocal(path); err != nil {
		return "", NewPermanent(fmt.Errorf("archive: %q: %w", path, err))
	}
	return filepath.Clean(path), nil
}

// checkLocal accepts a non-empty relative path with no ".." element and no
// NUL byte. Symbolic links are the os.Root's business.
func checkLocal(path string) error {
	if path == "" || strings.ContainsRune(path, 0) {
		return fmt.Errorf("%w: empty path or NUL byte", ErrPathEscape)
	}
	if !filepath.IsLocal(path) {
		return ErrPathEscape
	}
	for elem := range strings.SplitSeq(filepath.ToSlash(path), "/") {
		if elem == ".." {
			return fmt.Errorf("%w: %q element", ErrPathEscape, "..")
		}
	}
	return nil
}
