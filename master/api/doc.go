// Package api serves the v2_beta configuration and test-event API that
// docs/api.md documents: the active tree, the draft and its nodes and
// rules, import and export, and test events.
//
// Every request is authenticated by its bearer token and authorized by the
// authorization its param_auth names: its path is the part of the tree the
// caller may touch, and the last node of that path is the root of the
// request's node paths. Drafts are read and changed only by their owner.
//
// Every change of the draft is checked against the current draft and
// replicated as one small raft command carrying the edit (config.Edit),
// which every node applies to its draft, validating what it changes: an
// invalid change is refused with a JSON error and changes nothing. An
// authorization below the root edits only what lies below its node, and
// deploys only a draft that differs from the active tree there (DESIGN.md
// decision 19). The master server runs the API on the
// leader (requests to followers are forwarded), and this package
// serializes draft edits on that node so that concurrent edits never lose
// one another.
//
// Errors are JSON {"code", "params", "message"} (docs/decisions.md decision 16):
// 400 malformed input, 401 no or bad token, 403 role or path not allowed or
// not the owner (code NOT_OWNER), 404 no such draft, node or rule, 409 a
// name taken or a tree that would be invalid, 413 body too large, 415
// wrong content type, 503 no leader (with Retry-After).
//
// [API.VersionsHandler] serves the versions of the active tree under
// /squall/v1/tree/versions (list, show, diff, rollback; docs/api.md,
// "Versions"), which name their authorization in the auth query
// parameter; a deploy's ?message= is recorded with its version.
//
// [API.AuditHandler] serves the audit log at /squall/v1/audit (admin on
// the root; docs/api.md, "Audit log"). Every authenticated request
// carries its user and authorization in its context (store.Origin), which
// the store writes into the entries it submits for the audit log.
package api
