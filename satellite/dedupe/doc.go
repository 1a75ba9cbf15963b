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
// # Storage
//
// Committed ids are kept in a bbolt file (beside the spool in a satellite)
// so that the window survives a restart. Keys are the SHA-256 of the
// webhook id and the delivery id, so every entry has the same size on disk
// whatever the ids: about 150 bytes of data (the key, the expiry and the
// event id, in two B+trees), about 220 bytes of B+tree pages (measured by
// TestStore_Size), and up to about twice that in file size with the free
// pages bbolt keeps for reuse (the file grows by doubling and never
// shrinks). The number of entries is bounded by Config.MaxEntries: past it,
// the entries that expire first are dropped (counted in
// squall_dedupe_evicted_total), and expired entries are dropped as new
// ones are written. Memory holds only the claims in progress and the
// commits not yet written; the file is read through bbolt's memory map.
//
// Commits are written by one goroutine in groups, one fsync per group, so
// that the intake does not wait for the disk: the event itself is already
// durable (acknowledged by Kafka or spooled) when its id is committed. A
// crash, not a clean stop, may forget the ids of the last group, and a
// crash between the acceptance of an event and the commit of its id
// forgets that id: dedupe suppresses the retries of a sender, it is not a
// transaction with Kafka.
package dedupe
