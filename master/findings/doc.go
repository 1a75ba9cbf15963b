// Package findings serves the findings API of docs/findings.md under
// /intel/api/sdk/v0: technical integrations (leak monitors, scanners)
// insert credential findings for their tenant, list and read them, and
// triage them.
//
//	PUT   /findings/credentials   insert: 201 {"uid"}, also of the identical finding (X-Squall-Duplicate)
//	GET   /finding/{uid}          {total, page, limit, findings: [the finding]}
//	GET   /findings/credential    {total, page, limit, findings}, newest first
//	PATCH /finding/{uid}          change state, ticket, priority, severity
//
// Every request carries a bearer token (the formats of the configuration
// API, package auth) whose "tenant" claim names the one tenant it reads
// and writes; a token without one is answered 403. Reading needs the
// role findings_read, inserting findings_write, patching both (view and
// edit imply them; docs/decisions.md decision 8). Another tenant's
// findings are answered as missing (404), never counted or deduplicated
// against.
//
// Findings live in the replicated store (package store): inserts on the
// leader are grouped into shared raft entries, identical inserts return
// the existing uid. The master mounts the API OnLeaderWrite: followers
// forward requests to the leader, and there reads (GET) wait for a
// consistent read while inserts and patches (PUT, PATCH) do not. That
// placement's conditions hold for both: the handler only decodes and
// validates the body, then submits one command; whether the finding is
// new or a duplicate (insert) and whether it exists in the tenant
// (patch) is decided by the state machine when the command is applied;
// the answer is Apply's outcome, and a patch's answer reads the local
// state after its own Apply returned. docs/findings.md documents fields,
// validation, errors and how names are derived.
package findings
