// Package deadletters is the masters' dead-letter API: it lists, shows and
// replays the dead letters the engines wrote to the dead-letter topic
// (their form: package engine/deadletter), reading that topic itself
// with a reader outside any consumer group (docs/decisions.md decision
// 59), so that it moves no group's offsets and works while no engine
// runs.
//
// Routes (docs/api.md):
//
//   - GET /squall/v1/deadletters lists a page of dead letters, filtered by
//     stage, reason, error text, webhook and time, with the reasons of the
//     records it read grouped and counted, and a cursor to the next page.
//     A request reads at most Config.ScanLimit records and
//     Config.ScanBytes bytes, within Config.Timeout.
//   - GET /squall/v1/deadletters/{topic}/{partition}/{offset} shows one,
//     with its headers and the event.
//   - POST /squall/v1/deadletters/replay produces dead letters (by id, or
//     those a filter selects) back to the events topic, with their
//     replay count (squall-replay-count) one higher and the dead letter's
//     id (squall-replay-of), then records the replay with a marker in the
//     dead letter's partition. A dead letter with a marker is not
//     replayed again (already_replayed); one whose count reached
//     Config.MaxReplays stays dead (refused). Replays are paced by a
//     token bucket (Config.ReplayRate, Config.ReplayBurst) and run one
//     request at a time on the node (the leader, where squall master
//     mounts the route).
//
// Reading needs deadletters_read on the root (the bodies of every
// tenant's events), replaying deadletters_replay; admin has both.
package deadletters
