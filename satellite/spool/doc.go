// Package spool is the satellite's durable local queue: an append-only log of
// opaque records in segment files, written with fsync, bounded in size, read
// back in order by a single consumer, and recovered after a crash.
//
// The satellite appends an event here when Kafka cannot take it in time, and
// answers the webhook call only after [Spool.Append] returned: the record is
// then on disk (fsync'd) and survives a restart, a kill -9 and a power loss.
// A drainer reads the records back with [Spool.Read], sends them to Kafka,
// and calls [Spool.Commit] after the broker acknowledged them. Delivery is
// at least once: a record read but not committed before a crash is read
// again after the restart.
//
// # Files
//
// The spool directory holds:
//
//   - segment files named 00000000000000000001.seg, 00000000000000000002.seg,
//     …: an 8-byte header ("SQSPOOL1") followed by frames. A frame is the
//     payload length (uint32, little endian), a CRC-32C of the length bytes
//     and the payload together (uint32), then the payload. Only the last
//     segment is written to; it is sealed (fsync'd and closed) and a new one
//     started when it would grow past [Config.SegmentBytes];
//   - position: the read position of the consumer (segment, offset) with a
//     CRC, rewritten and fsync'd on every Commit;
//   - rejected.log: records the consumer gave up on ([Spool.Quarantine]),
//     in the same framing, kept for an operator;
//   - LOCK: held with flock(2) while the spool is open, so that two
//     processes never share a spool.
//
// Segments wholly before the read position are deleted; a segment read to
// its end is rolled and deleted as soon as it holds nothing unread.
//
// # Recovery
//
// [Spool.Open] scans every segment from the read position on and checks
// each frame's length and CRC. A process killed in the middle of a write
// leaves a torn frame at the end of the last segment: the segment is
// truncated at the last whole frame (counted in
// squall_spool_truncated_bytes_total) and appending goes on from there.
// Such a record was never acknowledged: its Append had not returned.
//
// # Bounds and concurrency
//
// The sum of the segment files' sizes never exceeds [Config.MaxBytes]:
// Append returns [ErrFull] instead, and the satellite answers 503 with
// Retry-After. Append is safe for concurrent use and commits in groups:
// appenders that arrive while an fsync is running share the next one.
// Read, Commit and Quarantine belong to one consumer goroutine.
package spool
