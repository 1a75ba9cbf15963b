package kafkasink

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// appendRecordBatch appends to b the Kafka record batch (format v2, magic
// 2, uncompressed, no producer id) of the n records of writes, and returns
// the extended slice. A record without a time is stamped now (unix
// milliseconds).
//
// The layout: base offset (int64), batch length (int32, the bytes after
// it), partition leader epoch (int32), magic (int8), CRC-32C of the rest
// (uint32), attributes (int16), last offset delta (int32), first and max
// timestamps (int64), producer id (int64), producer epoch (int16), base
// sequence (int32), record count (int32), then each record: its length, the
// attributes byte, the timestamp and offset deltas, the key, the value and
// the headers, lengths and deltas as zigzag varints, -1 for a null key or
// value.
func appendRecordBatch(b []byte, writes []*pendingWrite, n int, now int64) []byte {
	stamp := func(m *Message) int64 {
		if m.Time.IsZero() {
			return now
		}
		return m.Time.UnixMilli()
	}
	first, maxTime := int64(0), int64(math.MinInt64)
	i := 0
	for _, w := range writes {
		for j := range w.msgs {
			t := stamp(&w.msgs[j])
			if i == 0 {
				first = t
			}
			maxTime = max(maxTime, t)
			i++
		}
	}
	start := len(b)
	b = binary.BigEndian.AppendUint64(b, 0)               // base offset
	b = binary.BigEndian.AppendUint32(b, 0)               // batch length, below
	b = binary.BigEndian.AppendUint32(b, math.MaxUint32)  // partition leader epoch: -1
	b = append(b, 2)                                      // magic
	b = binary.BigEndian.AppendUint32(b, 0)               // CRC, below
	b = binary.BigEndian.AppendUint16(b, 0)               // attributes: no compression, create time
	b = binary.BigEndian.AppendUint32(b, uint32(n-1))     // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(first))   // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(maxTime)) // max timestamp
	b = binary.BigEndian.AppendUint64(b, math.MaxUint64)  // producer id: -1
	b = binary.BigEndian.AppendUint16(b, math.MaxUint16)  // producer epoch: -1
	b = binary.BigEndian.AppendUint32(b, math.MaxUint32)  // base sequence: -1
	b = binary.BigEndian.AppendUint32(b, uint32(n))       // records
	i = 0
	for _, w := range writes {
		for j := range w.msgs {
			m := &w.msgs[j]
			delta := stamp(m) - first
			size := 1 + varintLen(delta) + varintLen(int64(i)) + bytesLen(m.Key) + bytesLen(m.Value) + varintLen(int64(len(m.Headers)))
			for _, h := range m.Headers {
				size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
			}
			b = binary.AppendVarint(b, int64(size))
			b = append(b, 0) // attributes
			b = binary.AppendVarint(b, delta)
			b = binary.AppendVarint(b, int64(i))
			b = appendBytes(b, m.Key)
			b = appendBytes(b, m.Value)
			b = binary.AppendVarint(b, int64(len(m.Headers)))
			for _, h := range m.Headers {
				b = binary.AppendVarint(b, int64(len(h.Key)))
				b = append(b, h.Key...)
				b = appendBytes(b, h.Value)
			}
			i++
		}
	}
	binary.BigEndian.PutUint32(b[start+8:], uint32(len(b)-start-12))
	binary.BigEndian.PutUint32(b[start+17:], crc32.Checksum(b[start+21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// appendBytes appends p with its zigzag varint length, -1 when p is nil.
func appendBytes(b, p []byte) []byte {
	if p == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(p)))
	return append(b, p...)
}

// bytesLen returns the length of appendBytes's encoding of p.
func bytesLen(p []byte) int {
	if p == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(p))) + len(p)
}

// varintLen returns the length of the zigzag varint encoding of x.
func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}
