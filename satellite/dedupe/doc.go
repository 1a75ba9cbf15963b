// Package dedupe remembers the delivery ids of accepted webhook calls, so
// that a repeated delivery produces no second event.
//
// # Claims
//
// [Store.Begin] looks a delivery up. A delivery seen within its window is a
// duplicate, answered with the first call's event id. Otherwise the caller
// holds a claim on the id until it calls [Claim.Commit] (the event was
// accepted) or [Claim.Abort] (it was not): concurrent calls with the same
// id wait for that outcome instead of producing a second event, and a
// failed call leaves nothing behind, so the sender's retry goes through.
//
// # Memory and disk
//
// A delivery is known by the first 16 bytes of the SHA-256 of the webhook
// id and the delivery id, so every entry has the same size whatever the
// ids. The entries are held in memory (a map, about 60 bytes an entry) for
// the lookups, and in a bbolt file (beside the spool in a satellite) so
// that the window survives a restart: one B+tree keyed by expiry then key,
// with the event id (16 bytes) as value, about 65 bytes an entry as
// measured by TestStore_Size, because new entries are appended in
// expiry order. [DefaultMaxEntries], 250,000 entries, thus takes about
// 15 MB of memory and 16 MB of file (bbolt grows the file by doubling and
// keeps freed pages for reuse, so the file may be up to twice that).
//
// The number of entries is bounded by Config.MaxEntries: past it, the
// entries that expire first are dropped (counted in
// squall_dedupe_evicted_total), and expired entries are dropped as new
// ones are written and when the file is opened.
//
// Commits are written by one goroutine in groups (what comes within 10 ms,
// up to 1,024), one transaction and one fsync per group, so that the intake
// does not wait for the disk and a busy intake pays few fsyncs: the
// event itself is already durable (acknowledged by Kafka or spooled) when
// its id is committed. A crash, not a clean stop, may forget the ids of the
// last group (about 10 ms of calls), and a crash between the acceptance of an event and the
// commit of its id forgets that id: dedupe suppresses the retries of a
// sender; it is not a transaction with Kafka.
package dedupe
