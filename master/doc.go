// Package master runs a master node: the raft-replicated store
// (master/store) behind an HTTP API that any node answers.
//
// A [Server] is built from a [Config] with [New] and runs with
// [Server.Run] (or [Server.Start] and [Server.Shutdown]). The API
// packages mount their routes with [Server.Mount] before it starts; the
// master serves its own:
//
//	GET    /healthz                          process up
//	GET    /readyz                           store ready: a leader known, the log applied
//	GET    /metrics                          Prometheus: store, raft and HTTP metrics
//	GET    /squall/v1/cluster                this node's view: members, leader, term, indexes (view on root)
//	DELETE /squall/v1/cluster/members/{id}   remove a member (admin on root; leader)
//	POST   /squall/v1/cluster/join           add a node as a voter (join token; leader)
//	GET    /squall/v1/tree/active            tree watch, a blocking query (view on root; any ready node)
//	GET    /squall/v1/backup                 backup file of the state (admin on root; leader)
//	POST   /squall/v1/restore                restore a backup file (admin on root; leader)
//	GET    /squall/v1/draft                  the draft's id, owner and times, or null (view; leader)
//
// # Forwarding
//
// Any node accepts every request. Routes placed [OnLeader] (the master's
// leader routes above, and the configuration API) run on the leader: a
// follower forwards them to the leader's HTTP address with a reverse
// proxy, in one middleware, and relays the answer unchanged. The leader
// serves them after [store.Store.ConsistentRead], so a client never reads
// older state than it wrote, whichever node it asks. Raft knows only
// raft addresses; the leader's HTTP address comes from the replicated
// state, where every node records its own when it joins (the SetMember
// command), including the bootstrap node once it leads. Routes placed
// [OnLeaderWrite] (the findings API) serve their writes on the leader
// without the consistent read: their handlers leave every check against
// the state to the state machine (see OnLeaderWrite).
//
// During an election a request waits for a leader up to
// Config.LeaderWait, then is answered 503 with Retry-After: 1 and a JSON
// error; it never hangs. A forwarded request carries
// [HeaderForwardedBy]; a node that receives one and is not the leader
// answers 503 with [HeaderNotApplied] instead of forwarding it again.
//
// # Failover
//
// A follower whose forward fails looks for the leader again and sends
// the request again when that cannot apply it twice: when it never
// reached the leader (refused or timed-out connection, an answer with
// [HeaderNotApplied]), when its method is retry-safe (GET, HEAD,
// OPTIONS, and those a mount declares with [IdempotentMethods]), or when
// it is a write of a mount declared with [RequestIDs]: the node that
// receives such a write gives it a request id ([HeaderRequestID], or the
// client's [HeaderIdempotencyKey]), the leader submits its command with
// that id, and the replicated state machine applies an id once (see
// store.Session), answering a resend with the first outcome.
// It gives up on a leader whose connection broke at once, on one it no
// longer follows and has not heard from for raft's heartbeat timeout (it
// froze or died) at once too, and on one it no longer follows but heard
// from lately (it handed over) after that heartbeat timeout. A
// retry-safe request that the leader itself serves, and answers 503 once
// it lost its leadership, is routed again the same way. Any other request is
// answered 503 LEADER_LOST: it may have been applied (docs/operations.md,
// "Failover"; docs/decisions.md decisions 22, 31 and 32). [Server.Shutdown] on the leader first stops serving
// requests as leader, waits for those it serves, and transfers the
// leadership to another voter, so that a rolling restart answers no
// request with an error.
//
// # Errors
//
// Every error answer of the master's own endpoints is the JSON
// {"code", "params", "message"} of docs/decisions.md decision 16, written
// by one adapter that also logs it once. Mounted handlers write their own.
//
// # Joining
//
// A node started with Config.JoinURLs posts a [JoinRequest] to a member,
// with the cluster's join secret in [HeaderJoinToken]. Every join is
// authenticated: the receiving node checks the secret (constant time)
// before it reads the body or forwards the request, and the leader checks
// it again. The secret comes from Config.JoinTokenFile or from
// [JoinSecretFile] in the data dir, which a node writes when it
// bootstraps (or restarts with state) without one. The leader then runs
// store.Join: the raft address must answer a raft heartbeat (and, with
// raft TLS, present a certificate naming the node id); a new node enters
// as a non-voter and is promoted once it caught up; its HTTP address is
// recorded only after the raft step. A join that fails changes nothing.
// A node that restarts with the addresses its state already records
// sends no join; one whose addresses changed registers again.
package master
