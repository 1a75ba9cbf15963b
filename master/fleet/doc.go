// Package fleet lists the members of a Squall installation: the masters,
// from the cluster's configuration, and the engines and satellites, from
// the small heartbeats they send to the masters under /squall/v1/fleet/.
//
// Heartbeats (PUT /squall/v1/fleet/{role}/{id}) need a token with the
// fleet_report role on the root; the list (GET /squall/v1/fleet) needs
// view. They are kept in the memory of the node that receives them (the
// leader, where the routes are mounted; followers forward): they are not
// replicated, and after a change of leader the list fills again within
// one heartbeat interval. A member that stops reporting is shown as stale
// after Config.StaleAfter and dropped after Config.DropAfter.
//
// A member belongs to the user named by the token of its first heartbeat:
// another user's token cannot report it until it is dropped or an admin
// removes it (DELETE /squall/v1/fleet/{role}/{id}); one user holds at most
// Config.MaxPerReporter members (docs/decisions.md decision 60).
//
// Engines report their consumer group, topic, assigned partitions and the
// topic's partition count; [Fleet.Groups] lists, per group, the partitions
// no engine that is not stale owns, and the Fleet, a Prometheus collector,
// exposes their number as squall_fleet_partitions_unowned on the leader.
//
// Masters do not report: when the list is made, each one is asked for its
// own health (/readyz) and state (/squall/v1/cluster: version, raft state,
// term, indexes), in parallel and bounded by Config.ProbeTimeout
// (docs/decisions.md decision 30).
//
// [Reporter] is the client side, run by squall engine and squall
// satellite: a heartbeat every interval to the master that took the last
// one, the next master on failure, exponential backoff when every master
// failed, in its own goroutine so that it never delays the process's work.
package fleet
