// Package mastertest starts real master clusters in-process for tests:
// n master.Servers on 127.0.0.1 with random HTTP and raft ports, node 0
// bootstrapping and the others joining it over HTTP, as in production
// (rqlite's system_test helpers, Nomad's TestServer).
//
//	c := mastertest.TestCluster(t, 3)
//	leader := c.Leader()
//	resp := c.Get(t, c.Followers()[0], "/squall/v1/cluster", c.AdminToken)
//
// Nodes run with the production raft timeouts (600 ms: elections in about a second)
// and without fsync of the raft log (an in-process kill loses nothing
// that was written). Tokens are HS256 JWTs signed with a key generated
// for the cluster: AdminToken has admin on root; Token mints others.
// Everything is stopped by t.Cleanup.
package mastertest
