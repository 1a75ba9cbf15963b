package spool

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
)

// Position is a place in the spool: a segment and a byte offset in it.
type Position struct {
	// Segment is the id of the segment file.
	Segment uint64
	// Offset is the byte offset of a frame boundary in the segment.
	Offset int64
}

const positionLen = 8 + 8 + 4

// encodePosition encodes p with a CRC-32C, so that a torn write of the
// position file is detected rather than trusted.
func encodePosition(p Position) [positionLen]byte {
	var b [positionLen]byte
	binary.LittleEndian.PutUint64(b[0:8], p.Segment)
	binary.LittleEndian.PutUint64(b[8:16], uint64(p.Offset))
	binary.LittleEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], castagnoli))
	return b
}

// decodePosition decodes a position file's content; ok is false when it is
// missing, short or damaged.
func decodePosition(b []byte) (p Position, ok bool) {
	if len(b) < positionLen || crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:20]) {
		return Position{}, false
	}
	p = Position{Segment: binary.LittleEndian.Uint64(b[0:8]), Offset: int64(binary.LittleEndian.Uint64(b[8:16]))}
	return p, p.Segment > 0 && p.Offset >= headerLen
}

// readPosition reads the position file.
func readPosition(f *os.File) (Position, bool, error) {
	var b [positionLen]byte
	n, err := f.ReadAt(b[:], 0)
	if n == 0 && err != nil {
		// Empty or new file: no position yet.
		return Position{}, false, nil
	}
	p, ok := decodePosition(b[:n])
	return p, ok, nil
}

// writePosition overwrites the position file with p and fsyncs it.
func writePosition(f *os.File, p Position) error {
	b := encodePosition(p)
	if _, err := f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("write position: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync position: %w", err)
	}
	return nil
}
