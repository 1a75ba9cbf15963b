// Package fleet lists the members of a Squall installation: the masters,
// from the cluster's configuration, and the engines and satellites, from
// the small heartbeats they send to the masters under /squall/v1/fleet/.
//
// Heartbeats are kept in the memory of the node that receives them (the
// leader, where the routes are mounted): they are not replicated, and
// after a change of leader the list fills again within one heartbeat
// interval. A member that stops reporting is shown as stale after
// Config.StaleAfter and dropped after Config.DropAfter.
package fleet
