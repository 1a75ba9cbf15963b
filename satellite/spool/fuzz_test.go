package spool

import (
	"bytes"
	"testing"
)

// FuzzScanSegment checks recovery on arbitrary segment contents: the scan
// never panics, keeps only whole frames, and what it keeps reads back.
func FuzzScanSegment(f *testing.F) {
	seg := []byte(segmentMagic)
	seg = appendFrame(seg, []byte(`{"type":"x"}`))
	seg = appendFrame(seg, nil)
	f.Add(seg)
	f.Add(append(seg, 0x10, 0, 0))
	f.Add([]byte(segmentMagic + "\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		res, err := scanSegment(r, int64(len(data)), headerLen)
		if err != nil {
			return
		}
		if res.end < headerLen || res.end > int64(len(data)) {
			t.Fatalf("end %d of %d bytes", res.end, len(data))
		}
		var n, size int64
		for off := headerLen; off < res.end; {
			p, err := readFrame(r, off, res.end)
			if err != nil {
				t.Fatalf("frame at %d: %v", off, err)
			}
			off += frameHeaderLen + int64(len(p))
			n++
			size += frameHeaderLen + int64(len(p))
		}
		if n != res.records || size != res.bytes {
			t.Fatalf("scan found %d records (%d bytes), reading gives %d (%d)", res.records, res.bytes, n, size)
		}
	})
}
