// Package kafkasink writes the satellite's events to Kafka with
// segmentio/kafka-go. It is the only package of the satellite that imports
// kafka-go; no kafka-go type appears in its API.
//
// A [Sink] writes to one topic (default "squall.events") with acks from all
// in-sync replicas (acks=all) and returns from [Sink.Write] only once the
// brokers acknowledged every record, so that the satellite can answer a
// webhook call 200 on that basis. Records are partitioned by key with
// murmur2, the Java client's default partitioner, so that the records of one
// tenant stay in one partition, where other producers would put them too.
// Brokers are reached over TCP or TLS ([TLSConfig]), with SASL PLAIN or
// SCRAM-SHA-256/512 ([SASLConfig]); records may be compressed with gzip,
// snappy, lz4 or zstd.
//
// # Batching without a batch timer
//
// kafka-go's Writer batches on a timer (BatchTimeout): every acknowledged
// write waits for it, even when the broker is idle, and one partition has
// one batch in flight at a time. Measured on the intake benchmark, the
// requests spent ~2.5 ms of their ~4 ms waiting for that timer while the
// produce request itself took ~0.4 ms. So the Sink batches like a group
// commit instead, on kafka-go's Transport (connection pooling, leader
// routing, metadata, TLS, SASL, the wire protocol): a write to an idle
// broker is sent at once; writes that arrive while a request to their
// partition's leader is in flight are sent together, in one request (up to
// [Config.BatchSize] records, and [Config.MaxMessageBytes] bytes per
// partition), once it is acknowledged. Another request goes alongside, up
// to [Config.MaxInFlight] of them, only while 32 records (or a full record
// batch's bytes) wait; smaller batches wait for the next acknowledgement.
// On the intake benchmark, sending every waiting write at once made
// requests of ~5 records, and kafka-go and the broker then took about a
// fifth of the CPU; waiting for the acknowledgement makes them ~15 records.
//
// The requests are self-clocked: after a request of n records is
// acknowledged, the next one is sent once about n records wait (up to 32),
// or after half the produce round trip (a moving average; 1 ms at most),
// whichever comes first. The callers whose records were just acknowledged
// are the ones about to write again; without the wait, the first of them
// found the broker idle and went alone, and the others made the request
// after it: with one busy tenant, ~40% of the requests carried one record
// (docs/BENCHMARKS.md, "Webhook intake"). A request of one record is followed by
// no wait at all, so a lone record at low load goes at once, and so does a
// request beside another in flight. Batches grow with the load, and a record
// waits for the clock of the acknowledgements, never for a fixed timer.
//
// One produce request carries the records of every partition its broker
// leads, one record batch per partition, rather than one request per
// partition: with the events of many tenants spread over the partitions,
// requests per partition made batches of ~5 records, and one request per
// broker makes them as large as with one partition (docs/BENCHMARKS.md,
// "Webhook intake"). The broker answers for each partition:
// the writes of an acknowledged partition are done, those of a partition
// refused with a temporary error are tried again, alone, and those refused
// for good fail, while the others succeed.
//
// # Record batches
//
// Uncompressed record batches (the default) are encoded here, in one buffer
// per request, and sent as kafka-go raw produce requests: kafka-go's own
// encoder went through a reader and interfaces per record field and cost the
// satellite several times more CPU per record. Compressed batches are
// encoded and compressed by kafka-go.
//
// # Waiting for the acknowledgement
//
// [Sink.WriteWithin] writes one record and waits at most a timeout for its
// acknowledgement (the satellite's AckTimeout); a record not yet sent when
// its time is up is dropped, since the caller keeps it elsewhere (the
// spool). Its deadline is watched by one timer per broker, not a context
// and a timer per call: under a steady load the timer fires about once per
// timeout, finds the writes it was armed for acknowledged, and is armed
// again for the oldest write still waiting. A context and a timer per event
// cost about 5% of the satellite's CPU per request in the side-by-side
// benchmark.
//
// The records of one Write keep their order: they go in one record batch,
// or in requests sent one after the other. Writes in flight at the same time come
// from concurrent calls, which have no order between them. A request that
// fails is tried again up to [Config.MaxAttempts] times when the error is
// temporary (network, leader change).
//
// Errors wrapping [ErrRejected] mean that a record can never be written as
// it is (larger than [Config.MaxMessageBytes], or refused by the brokers as
// too large or invalid); every other error may pass, and the satellite then
// keeps the record in its spool and tries again.
package kafkasink
