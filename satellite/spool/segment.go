package spool

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// segmentMagic starts every segment file and rejected.log.
	segmentMagic = "SQSPOOL1"
	// headerLen is the size of a segment's header: frames start here.
	headerLen = int64(len(segmentMagic))
	// frameHeaderLen is the size of a frame's length and CRC.
	frameHeaderLen = 8
	// MaxRecordBytes bounds the payload of one record: 256 MiB.
	MaxRecordBytes = 256 << 20

	segmentSuffix = ".seg"
	positionFile  = "position"
	rejectedFile  = "rejected.log"
	lockFile      = "LOCK"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameCRC is the CRC-32C of a frame's length bytes followed by its payload,
// so that a zeroed or torn header never passes as a record.
func frameCRC(length []byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, length), castagnoli, payload)
}

// appendFrame appends the frame of payload to dst.
func appendFrame(dst, payload []byte) []byte {
	var h [frameHeaderLen]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], frameCRC(h[:4], payload))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// segmentName is the file name of segment id.
func segmentName(id uint64) string { return fmt.Sprintf("%020d%s", id, segmentSuffix) }

// parseSegmentName returns the id of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil && id > 0
}

// createSegment creates segment id in dir, writes its header, and makes both
// the file and its directory entry durable.
func createSegment(dir string, id uint64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentName(id)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	if _, err := f.WriteAt([]byte(segmentMagic), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write segment header: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync segment: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// syncDir makes the directory entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open spool directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	return nil
}

// errBadHeader reports a segment file that does not start with segmentMagic.
var errBadHeader = errors.New("bad segment header")

// scanResult describes the whole frames at the start of a segment.
type scanResult struct {
	end      int64 // offset after the last whole frame
	records  int64 // frames from offset from on
	bytes    int64 // their size, headers included
	boundary bool  // from is a frame boundary (or the end)
}

// scanSegment checks the header and every frame of a segment of the given
// size, and counts the frames that start at or after from. It stops at the
// first frame that is cut short or fails its CRC: what follows is a torn
// write (or damage) and is not part of the log.
func scanSegment(r io.ReaderAt, size, from int64) (scanResult, error) {
	var magic [headerLen]byte
	if size < headerLen {
		return scanResult{}, errBadHeader
	}
	if _, err := r.ReadAt(magic[:], 0); err != nil {
		return scanResult{}, fmt.Errorf("read segment header: %w", err)
	}
	if string(magic[:]) != segmentMagic {
		return scanResult{}, errBadHeader
	}
	res := scanResult{end: headerLen, boundary: from == headerLen}
	br := bufio.NewReaderSize(io.NewSectionReader(r, headerLen, size-headerLen), 256<<10)
	var h [frameHeaderLen]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			break // clean end, or a torn frame header
		}
		n := int64(binary.LittleEndian.Uint32(h[:4]))
		if n > MaxRecordBytes || res.end+frameHeaderLen+n > size {
			break
		}
		if int64(cap(payload)) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			break
		}
		if frameCRC(h[:4], payload) != binary.LittleEndian.Uint32(h[4:]) {
			break
		}
		if res.end >= from {
			res.records++
			res.bytes += frameHeaderLen + n
		}
		res.end += frameHeaderLen + n
		if res.end == from {
			res.boundary = true
		}
	}
	return res, nil
}

// readFrame reads the frame at off of a segment whose whole frames end at
// end, and returns its payload.
func readFrame(r io.ReaderAt, off, end int64) ([]byte, error) {
	var h [frameHeaderLen]byte
	if off+frameHeaderLen > end {
		return nil, fmt.Errorf("%w: frame header past the end at offset %d", ErrCorrupt, off)
	}
	if _, err := r.ReadAt(h[:], off); err != nil {
		return nil, fmt.Errorf("read frame: %w", err)
	}
	n := int64(binary.LittleEndian.Uint32(h[:4]))
	if off+frameHeaderLen+n > end {
		return nil, fmt.Errorf("%w: frame of %d bytes past the end at offset %d", ErrCorrupt, n, off)
	}
	payload := make([]byte, n)
	if n > 0 {
		if _, err := r.ReadAt(payload, off+frameHeaderLen); err != nil {
			return nil, fmt.Errorf("read frame: %w", err)
		}
	}
	if frameCRC(h[:4], payload) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, fmt.Errorf("%w: CRC mismatch at offset %d", ErrCorrupt, off)
	}
	return payload, nil
}
