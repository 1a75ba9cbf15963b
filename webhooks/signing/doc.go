// Package signing verifies the signatures that webhook producers put on
// their requests, one [Verifier] per webhook.
//
// A scheme names how a producer signs:
//
//	github             X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>
//	standard-webhooks  webhook-id, webhook-timestamp, and webhook-signature:
//	                   "v1,<base64>" (space-separated, one or more) of
//	                   "{id}.{timestamp}.{body}"; secrets are "whsec_<base64>";
//	                   Svix's svix-id, svix-timestamp and svix-signature too
//	stripe             Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>…] of "{t}.{body}"
//	slack              X-Slack-Signature: v0=<hex> of
//	                   "v0:{X-Slack-Request-Timestamp}:{body}"
//	hmac               the generic form: a header, a prefix, hex or base64,
//	                   SHA-256 or SHA-512, an optional timestamp header and
//	                   the template of the signed content
//
// A Verifier holds one or more keys (rotation): a request passes when any
// key still valid (see [Key].NotAfter) verifies any one of its signatures,
// and [Verifier.Verify] returns that key's index. Timestamped schemes
// refuse a timestamp more than the tolerance away from the current time,
// in either direction (replays). Every digest is compared in constant time;
// header values longer than [MaxHeaderLen] are refused before any parsing.
//
// The package is pure: no I/O, no clock (the caller passes the time), no
// logging. Keys are never printed: the String, Format and LogValue methods
// of [Verifier] redact them.
package signing
