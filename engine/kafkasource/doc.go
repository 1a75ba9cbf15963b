// Package kafkasource is the engine's side of Kafka: a consumer-group
// [Source] that fetches the events and commits offsets, and a [Writer] that
// produces records (the dead-letter topic). It wraps segmentio/kafka-go and is
// the only package of the engine that imports it; no kafka-go type appears in
// its API.
//
// # Consuming
//
// A [Source] is a member of a consumer group built on kafka-go's
// ConsumerGroup (membership, assignments, offset commits) and its Conn (the
// fetches), without kafka-go's Reader: [Source.FetchBatch] returns the
// messages of one fetch of one partition, up to [MaxBatchMessages] at a
// time, with no channel operation or goroutine hand-off per message, and
// [Source.Fetch] returns them one at a time. Neither commits anything:
// [Source.Commit] commits, synchronously, positions the caller chose (the
// next offset to read of each partition, once every message before it was
// processed). Offsets are never committed automatically. A new group
// starts at the first offset of each partition (or the last, with
// [StartLatest]).
//
// Each generation of the group starts one fetching goroutine per assigned
// partition, from the group's committed offset; they end with it.
// [Source.Assignment] and [SourceConfig.OnAssignment] report the
// generations; the engine uses them for readiness and to stop tracking
// partitions it no longer owns. At most [SourceConfig.QueueCapacity]
// messages (rounded up to whole batches) wait fetched ahead of the caller.
//
// After a rebalance every partition restarts at its committed offset, so
// messages fetched but not committed are delivered again, to this member
// or another: consumers must be idempotent per event. Batches fetched in a
// generation that ended are dropped, not delivered. A commit during a
// rebalance waits for the next generation and commits only the partitions
// the member owns in it; one in flight when the Source closes returns
// [ErrClosed].
//
// # Outages
//
// A broker that closes its connections (stopped, crashed) ends the
// member's generation at the next heartbeat. One that stops answering on
// them (frozen, cut off by the network) ends it within the session
// timeout: the Source dials the brokers itself and, during a generation,
// closes a connection whose request has waited longer than the session
// timeout less a heartbeat, which makes kafka-go's heartbeat fail. A
// failed join is retried [SourceConfig.JoinBackoff] later (1 s), and the
// member the Source was before the outage is removed from the group, so
// that a broker that kept the group does not make the new join wait for
// that member's session to end. The first
// failure of an outage is logged at warn, the next ones at debug, and the
// return as "consumer group joined again" with the outage's length and
// failed attempts; [Source.LastError] keeps the last error for readiness.
//
// A member that dies (a SIGKILLed engine) at any stage of joining, even
// while its JoinGroup waits for the others, is removed by the coordinator
// one session timeout after it last heard from it, and the others take its
// partitions at their next heartbeat: every partition has a live owner
// again within the session timeout and a heartbeat or two (about 7s with
// the defaults; docs/RELIABILITY.md).
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
