// Package engine is Squall's engine service: it consumes the events the
// satellites put in Kafka, evaluates each against the active processing
// tree, and runs the actions of the rules that match.
//
// A [Service] is built from a [Config] by [New], which starts nothing, and
// runs with [Service.Run], which blocks until its context ends. Several
// engines share the events through one Kafka consumer group; each follows
// the masters' active tree on its own.
//
// # The tree
//
// The engine follows the tree watch of the masters (GET
// /squall/v1/tree/active?index=N&wait=30s, a blocking query) on one of
// Config.MasterURLs at a time, moving to the next when a request fails, and
// backing off with jitter once all failed (a 503's Retry-After is honoured).
// Each new tree is decoded and compiled ([tree.Compile]) and swapped in
// atomically with its index; a tree that does not compile is refused
// (logged, squall_engine_tree_compile_failures_total) and the previous one
// stays. A worker reads the current tree once per event, so every event is
// evaluated against exactly one tree version, the one in
// squall_engine_tree_index and in the logs (tree_index). Index 0, the
// master's initial tree before any deployment, is not a tree to process
// with: until the masters answer a deployed tree, the engine does not
// consume and is not ready. An answer with an index below the tree in use
// (a master that lost its state or lags far behind) is never installed:
// the engine tries another master. A master cluster rebuilt from scratch,
// whose indexes start again below the engines', needs the engines
// restarted.
//
// # Consuming
//
// Once it has a tree, the engine joins the consumer group
// ([kafkasource.Source]) and fetches without committing, a batch of one
// partition's messages at a time (docs/decisions.md decision 37). Each
// message goes to one of Config.Workers workers chosen by a hash of its key
// (the tenant id), so the events of one key are processed one at a time, in
// order, while other keys run in parallel; a batch's messages reach each
// worker in chunks (one channel operation per chunk), each worker has a
// bounded queue (Config.QueueSize events), and fetching waits when the next
// chunk's queue is full. A worker:
//
//  1. skips the event if its squall-event-id is in the dedupe window (the
//     ids processed recently, bounded by Config.DedupeSize and
//     Config.DedupeMaxAge): redeliveries after a rebalance
//     (squall_engine_events_deduplicated_total);
//  2. decodes it ([tree.DecodeEvent]); a record that is not an event goes to
//     the dead-letter topic;
//  3. evaluates it against the current tree ([tree.Tree.Actions]);
//  4. runs each action through the [action.Registry], which retries
//     retriable failures; if an action still fails, the others still run
//     and then the record goes to the dead-letter topic, saying which
//     actions failed and why;
//  5. remembers its id and marks the message finished; when its archive
//     actions left lines in the worker's write batch, only once the batch
//     is written: when 256 events wait for it, 2 ms after the first of
//     them, or when the worker's queue is empty (docs/decisions.md
//     decision 38). A line the batched write
//     fails to write is written again on its own, through the registry's
//     retries; if that fails too, the event is dead-lettered.
//
// A dead-lettered record is the original (key, value, headers) plus
// squall-error (the reason), squall-error-stage (decode, evaluate or
// action), squall-error-actions ("index:id,…"), squall-error-rules (their
// positions), squall-tree-index, squall-engine (Config.Name),
// squall-dead-at, squall-origin (topic/partition/offset) and
// squall-origin-time, stamped with the time it died (package
// [deadletter]). A replayed event (the masters' dead-letter API) is
// deduplicated by its squall-event-id and its squall-replay-of together.
// A bad event so never blocks the stream: it is
// dead-lettered and the next ones flow. Writing the dead letter is retried
// until it succeeds (the event's worker waits meanwhile), because an event
// is never finished without its actions or its dead letter.
//
// A slow event (an action waiting on a timeout, or retrying) holds back the
// events of its key, and of the other keys of its worker; once that
// worker's queue is full, fetching waits too. That is the price of per-key
// order with bounded memory.
//
// # Offsets
//
// Offsets are committed only for finished messages: per partition, up to
// the longest run of finished messages in fetch order (an offset tracker),
// Config.CommitDelay after an event finished (5ms: the events finished
// meanwhile go in the same commit), after Config.CommitBatch events, and
// every Config.CommitInterval. So delivery is at least once, without
// gaps: an event whose processing was cut off holds back the commits of its
// partition and comes again after a restart or a rebalance. After a
// rebalance the Source restarts every partition at its committed offset; the
// tracker forgets what it tracked for it, and partitions the engine no
// longer owns are never committed.
//
// The prompt commit keeps short the list of events an engine that dies
// has run but not committed, which another engine runs again: those of its
// last milliseconds, and those finished ahead of a slower event of their
// partition. Whatever the commit settings, the list is bounded: the fetch
// loop hands a batch to the workers only while fewer than 2 × Workers ×
// QueueSize fetched events wait for their commit (queued, in progress, or
// finished); at the bound it asks the commit loop for a commit and waits
// for it. A crash repeats at most 2 × Workers × QueueSize +
// [kafkasource.MaxBatchMessages] events. The actions of a repeated event
// carry the same idempotency keys as the first time
// ([tree.Action.IdempotencyKey]: the engine sets each action's EventID
// from the record's squall-event-id header), which every executor passes
// on; the archive writes a key once per file.
//
// # Shutdown
//
// When Run's context ends, the engine stops fetching (readiness false),
// lets the workers finish the queued events for up to
// Config.ShutdownTimeout (then cancels the actions in progress: their
// events stay uncommitted), commits, leaves the group, and closes the
// dead-letter writer and the executors.
//
// # Ops
//
// [Service.Handler] serves GET /healthz, GET /readyz (200 with a tree and a
// group membership, else 503; a [Status] body) and GET /metrics: the
// squall_engine_* metrics (events processed, failed, deduplicated and
// abandoned; stage latencies for decode, evaluate, act and commit; tree
// index, updates and refusals; dead letters; commits; assigned
// partitions and their lag) and the registry's squall_action_* metrics.
package engine
