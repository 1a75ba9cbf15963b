// Package kafkasource is the engine's side of Kafka: a consumer-group
// [Source] that fetches the events and commits offsets, and a [Writer] that
// produces records (the dead-letter topic). It wraps segmentio/kafka-go and is
// the only package of the engine that imports it; no kafka-go type appears in
// its API.
//
// # Consuming
//
// A [Source] is a kafka-go Reader in a consumer group, used the way the
// project learned to use it: [Source.Fetch] returns the next message without
// committing anything, and [Source.Commit] commits, synchronously, positions
// the caller chose (the next offset to read of each partition, once every
// message before it was processed). Offsets are never committed
// automatically. A new group starts at the first offset of each partition.
//
// kafka-go does not report group membership, so the Source watches the
// reader's own log lines: "subscribed to topics and partitions" starts a
// generation (its assignment is read from the argument), "stopped commit"
// ends it. [Source.Assignment] and [SourceConfig.OnAssignment] report the
// result; the engine uses it for readiness and to stop tracking partitions
// it no longer owns. The log lines are those of kafka-go v0.4.51, the
// pinned version; the tests fail if an upgrade changes them.
//
// After a rebalance kafka-go restarts every partition at its committed
// offset, so messages fetched but not committed are delivered again, to this
// member or another: consumers must be idempotent per event. A commit
// during a rebalance waits for the next generation; one in flight when the
// Source closes returns [ErrClosed] (kafka-go alone would wait forever).
//
// # Producing
//
// A [Writer] writes records to one topic with acks from all in-sync replicas
// (acks=all), partitioned by key with murmur2 as the satellite does, and
// returns once they are acknowledged. Batches leave after
// [WriterConfig.BatchTimeout] (2 ms by default; kafka-go's default of 1 s
// would stall every write).
//
// # Connections
//
// Both reach the brokers over TCP or TLS ([TLSConfig]), with optional SASL
// PLAIN or SCRAM-SHA-256/512 ([SASLConfig]), as the satellite's sink does.
package kafkasource
