package action

import (
	"bytes"
	"fmt"
	"io"

	"github.com/squallhq/squall/engine/tree"
)

// ArchiveKeyField is the field an archive line starts with when its action
// has an idempotency key: {"squall_idempotency_key":"<key>", …the event's
// fields}. The archive writes no line whose key it finds among the last
// [ArchiveConfig.RecentKeys] lines it found in the file or wrote.
const ArchiveKeyField = "squall_idempotency_key"

// archiveKeyPrefix is how a keyed line begins.
const archiveKeyPrefix = `{"` + ArchiveKeyField + `":"`

// keyLen is the length of an idempotency key.
const keyLen = tree.IdempotencyKeyLen

// archiveTailBytesPerKey bounds what is read back from a file at open, per
// remembered key: a file whose last RecentKeys lines are longer is read
// back only this far (RecentKeys × 4 KiB: 16 MiB with the defaults).
const archiveTailBytesPerKey = 4 << 10

// lineKey is an idempotency key, as its characters.
type lineKey [keyLen]byte

// recentKeys is the bounded set of the keys of a file's last lines, the
// oldest forgotten first.
type recentKeys struct {
	set  map[lineKey]struct{}
	ring []lineKey
	head int // oldest, once the ring is full
}

func newRecentKeys(size int) *recentKeys {
	return &recentKeys{set: make(map[lineKey]struct{}, min(size, 1024)), ring: make([]lineKey, 0, min(size, 1024))}
}

// has reports whether k is remembered.
func (r *recentKeys) has(k lineKey) bool {
	_, ok := r.set[k]
	return ok
}

// add remembers k, forgetting the oldest key beyond size, and reports
// whether it was new.
func (r *recentKeys) add(k lineKey, size int) bool {
	if _, ok := r.set[k]; ok {
		return false
	}
	if len(r.ring) < size {
		r.ring = append(r.ring, k)
	} else {
		delete(r.set, r.ring[r.head])
		r.ring[r.head] = k
		r.head = (r.head + 1) % size
	}
	r.set[k] = struct{}{}
	return true
}

// addLines remembers the keys of the complete keyed lines of b, in order.
func (r *recentKeys) addLines(b []byte, size int) {
	for line := range bytes.Lines(b) {
		if line[len(line)-1] != '\n' {
			break // torn: the write that left it did not complete
		}
		if k, ok := keyOfLine(line); ok {
			r.add(k, size)
		}
	}
}

// keyOfLine returns the key a line starts with.
func keyOfLine(line []byte) (lineKey, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(archiveKeyPrefix))
	if !ok || len(rest) <= keyLen || rest[keyLen] != '"' {
		return lineKey{}, false
	}
	return lineKey(rest[:keyLen]), true
}

// readTail reads back the last lines of f, from its end at size, at most
// lines lines and maxBytes bytes, and returns them whole: a line cut by the
// byte bound is dropped. It also reports whether the file ends without a
// newline (a write torn by a crash).
func readTail(f io.ReaderAt, size int64, lines, maxBytes int) (tail []byte, torn bool, err error) {
	if size == 0 || lines == 0 {
		return nil, false, nil
	}
	chunk := int64(64 << 10) // doubled at each step: O(size) copies
	var buf []byte           // the bytes from off to size
	off := size
	newlines := 0
	for off > 0 && len(buf) < maxBytes {
		n := min(chunk, off, int64(maxBytes-len(buf)))
		chunk *= 2
		off -= n
		b := make([]byte, int(n)+len(buf))
		if _, err := f.ReadAt(b[:n], off); err != nil && err != io.EOF {
			return nil, false, err
		}
		copy(b[n:], buf)
		buf = b
		// Enough lines: a newline before the last `lines` newlines.
		if newlines += bytes.Count(buf[:n], []byte{'\n'}); newlines > lines {
			break
		}
	}
	torn = buf[len(buf)-1] != '\n'
	if off > 0 { // the first line may be cut: drop it
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return nil, torn, nil
		}
		buf = buf[i+1:]
	}
	// Keep the last `lines` complete lines.
	end := len(buf)
	if torn {
		end = bytes.LastIndexByte(buf, '\n') + 1
	}
	start, n := end, 0
	for start > 0 && n < lines {
		i := bytes.LastIndexByte(buf[:start-1], '\n')
		start = i + 1
		n++
	}
	return buf[start:end], torn, nil
}

// recover reads back the keys of the file's last lines and where the file
// ends. The caller holds f.mu.
func (f *archiveFile) recover(size int) error {
	st, err := f.f.Stat()
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	f.size = st.Size()
	tail, torn, err := readTail(f.f, f.size, size, size*archiveTailBytesPerKey)
	if err != nil {
		return fmt.Errorf("read back the last lines: %w", err)
	}
	f.found.addLines(tail, size)
	f.torn = torn
	return nil
}

// catchUp reads what another writer appended since the file's known end
// (another engine on the same directory, which took over this one's work or
// gave it up), and remembers its keys. The caller holds f.mu.
func (f *archiveFile) catchUp(size int) error {
	st, err := f.f.Stat()
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	end := st.Size()
	switch {
	case end == f.size:
		return nil
	case end < f.size: // truncated in place (copytruncate): nothing to read
		f.size = end
		return nil
	}
	tail, torn, err := readTail(io.NewSectionReader(f.f, f.size, end-f.size), end-f.size, size, size*archiveTailBytesPerKey)
	if err != nil {
		return fmt.Errorf("read back the lines appended by another writer: %w", err)
	}
	f.found.addLines(tail, size)
	f.size, f.torn = end, torn
	return nil
}
