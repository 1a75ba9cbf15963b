// Package robustness is a test-only suite (its code is in the _test.go
// files; this file holds only the package comment), in the spirit of etcd's
// robustness tests, that runs real `squall master` processes and checks
// what their clients see while a nemesis breaks the cluster.
//
// # What it runs
//
// TestMain builds the squall binary once. Each test starts a cluster of
// real master processes (Cluster, 3 nodes by default, 5 with
// -robustness.nodes=5), each on its own loopback IP (127.X.Y.N, X and Y
// random per run) so that the nodes can be told apart by the source of
// their connections: every node makes its outbound raft connections from
// its own IP (--raft-source-ip) and advertises, as its raft address, a
// small TCP proxy (Network) placed in front of its raft port. A
// partition is a set of blocked (source, destination) node pairs: the
// proxy of the destination refuses the connections of a blocked source
// and cuts the open ones, in both directions, so a partitioned node
// neither reaches nor is reached by the others. The HTTP traffic between
// masters (requests forwarded to the leader) is not partitioned.
//
// # Workload, nemesis, checks
//
// Concurrent clients (Workload) send requests, each with a deadline,
// to random live nodes: findings inserts (unique), gets, and PATCHes of
// the `ticket` field used as a register per finding; and configuration
// API operations on one draft node's description (draft edits, draft
// reads, deploys, active tree reads). Every operation is recorded in a
// History with its call and return times; an outcome that is not known
// (a timeout, a transport error, a 5xx answer to a write) is recorded as
// an operation that may or may not have happened, with no return time,
// as porcupine expects.
//
// The nemesis (Nemesis) SIGKILLs the leader or a random node and
// restarts it after a delay, SIGSTOPs and SIGCONTs a node, and
// partitions the leader or a random node away from the others.
//
// At the end the cluster is healed and every node is asked for every
// acknowledged insert (a lost acknowledged write fails the test), and
// the histories are checked with github.com/anishathalye/porcupine
// against the models FindingModel and ConfigModel (a history that is
// not linearizable fails the test). Client-visible errors are counted by
// kind and checked against a budget (-robustness.max-errors); failover
// times (from a fault on the leader to the first write acknowledged
// after it) are reported.
//
// # Running
//
//	go test ./cmd/squall/internal/robustness                       # 15 s, 3 nodes
//	go test ./cmd/squall/internal/robustness -run TestRobustness \
//	    -robustness.duration=10m -robustness.nodes=5 -robustness.out=/tmp/rob -count=1 -timeout=30m
//
// See docs/RELIABILITY.md for the method and the figures of long runs.
package robustness
