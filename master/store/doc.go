// Package store is the master's replicated state: the one active
// processing tree, the one draft, and the findings, kept identical on
// every master by hashicorp/raft. It is the only package of Squall that
// imports raft; its API speaks in config trees, drafts, members and the
// errors of this package.
//
// # Writes
//
// A write is a [Command] submitted on the leader with [Store.Apply] (or a
// helper such as [Store.Deploy]). A node that is not the leader answers a
// [*NotLeaderError] naming the leader, for the caller to forward the write.
// Several commands can share one raft log entry with [Store.Batch]; they are
// applied in order, each with its own [Result].
//
// Every log entry is one command type byte, one payload version byte and a
// JSON payload. Applying is deterministic: ids and timestamps are chosen
// by the submitting node before the command enters the log. Checks that
// decide between concurrent clients — draft ownership, draft existence,
// whole-tree validation — happen when the command is applied, so the log
// order decides and a refused command (Result.Err) changes nothing. An entry
// this binary cannot decode panics instead of being skipped.
//
// Draft edits ([DraftEdit]) carry one change of the draft, not the whole
// tree: a rule edit of a 20,000-rule draft is an entry of a few hundred
// bytes. Apply copies only the nodes on the way to the change (trees in
// the state are never modified in place) and appends the edit to a bucket
// of the state file; the tree is stored whole again every 256 edits and
// on deploy. [DeployScoped] refuses a deploy whose draft differs from the
// active tree outside the deployer's node.
//
// A request that may reach the leader more than once (sent again after a
// leader failed while it had it, or retried by its client) has a
// [Session], which its handler passes to [Store.Apply]: its command is
// wrapped with the request's key, and the state machine applies a key
// once, returning Result.Replayed for the later ones; a bounded table of
// applied keys ([SessionWindow], [MaxSessions]) is part of the state.
//
// From feature level [LevelAudit], every entry that changes the state
// carries the [Origin] of its request (from the context given to
// [Store.Apply]) and the leader's time, and applying it records an audit
// record in the state, chained by hashes ([Store.Audit],
// [Store.AuditRecords]; package master/audit).
//
// # State
//
// The state machine keeps its state in its own bbolt file, fsm.db, beside
// the raft log (raft.db, raft-boltdb) and the snapshots, and a decoded copy
// in memory for reads. Each change records its raft log index: the state
// index ([Store.Index]), and for the active tree its own index, which
// [Store.WaitActive] uses for blocking watches. A snapshot is the state file
// streamed as a bbolt file; restoring one replaces the file atomically.
// The state file is written without fsync and kept across a restart only
// after a clean Close; after a crash it is rebuilt from the newest snapshot
// and the raft log, which are synced.
//
// # Reads
//
// [Store.Active], [Store.Draft] and [Store.WaitActive] read the local
// state. A read that must see every acknowledged write calls
// [Store.ConsistentRead] first: on the leader it waits for the barrier the
// leader runs after each election and verifies leadership with a quorum.
//
// # Cluster
//
// One node starts with Config.Bootstrap; the leader adds the others with
// [Store.Join] and removes them with [Store.Remove]. Join admits only an
// address that answers a raft heartbeat (with TLS, from a certificate
// naming the node id), adds a new node as a non-voter and promotes it once
// its log caught up, so a member never counts in the quorum before it can
// vote; a failed join leaves the configuration and the HTTP addresses as
// they were. A restart from the data
// dir keeps the state and the membership. Raft traffic is TCP, with mutual
// TLS when Config.TLS names the certificate files. Each member's HTTP
// address is replicated state beside raft's configuration ([SetMember],
// [Store.HTTPAddr]), so that any node can forward requests to the leader.
//
// # Findings
//
// Security findings of each tenant are kept in the state file only (not
// in memory, except an index of their dedupe keys' fingerprints, about 38
// bytes per finding): [InsertFindings] stores a batch in one entry,
// deduplicating identical findings, [PatchFinding] triages one, [Store.Finding] and
// [Store.Findings] read them (newest first through an index), and
// [Store.InsertFinding] groups concurrent inserts into shared entries.
//
// # Backups
//
// [Store.Backup] returns the active tree and the draft as a [Backup],
// whose JSON form is the backup file; [Store.Restore] replaces both with a
// backup's in one command ([RestoreState]), in this or another cluster.
//
// DESIGN.md beside this file explains the choices.
package store
