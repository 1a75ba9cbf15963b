// Package webhooks holds webhook definitions and the collector that turns a
// webhook request body into an event.
//
// The package does no networking and serves no HTTP; besides the webhook
// files, it reads only the token and secret files and the environment
// variables that they name. The satellite (and the master's intake) read a
// directory of webhook files with [LoadDir], serve one endpoint per webhook,
// check the token with [Webhook.MatchToken] (and the optional signature
// with [github.com/squallhq/squall/webhooks/signing.Verifier.Verify]), and
// call [Collector.AppendEvent] on the body for the event's JSON.
//
// # Webhook files
//
// One JSON file per webhook:
//
//	{
//	  "id": "github_repository",
//	  "token": "a-long-random-token",
//	  "tenant_id": "tenant_a",
//	  "max_payload_size": "2m",
//	  "signature": {"header": "X-Hub-Signature-256", "secret": "…", "prefix": "sha256="},
//	  "collector_config": {
//	    "event_type": "${commits[0].committer.name}",
//	    "payload": {"source": "github", "ref": "${ref}", "all": "${@}"}
//	  }
//	}
//
// The fields:
//   - id (required) is the endpoint path segment: ASCII letters, digits,
//     '_', '.' and '-', at most [MaxIDLen] bytes, not "." or "..". Tornado
//     allows any text here; Squall restricts it so that ids are safe in
//     paths, logs and metric labels.
//   - token (required, non-empty) is the value the caller must send in the
//     token query parameter. To rotate it, write "tokens" instead: a list of
//     up to [MaxCredentials] entries, any of which is accepted. Each entry is
//     a string or an object with exactly one of "value", "file" (a path,
//     relative to the webhook directory; the file must be readable by its
//     owner only) and "env" (an environment variable), and an optional
//     "not_after" (RFC 3339) after which the entry is refused. Unless a
//     signature protects the webhook, every token has at least
//     [MinTokenLen] characters.
//   - tenant_id (optional, non-empty when present) fixes metadata.tenant_id
//     of the webhook's events; without it the intake's tenant is used.
//   - max_payload_size (optional) is a JSON number of bytes or a string such
//     as "2m" (see [ParseSize]); the default is [DefaultMaxPayloadSize].
//   - signature (optional) configures the check of the producer's signature:
//     "scheme" (github, standard-webhooks, stripe, slack or hmac; see
//     package signing), "secret" or "secrets" (entries as for tokens),
//     "tolerance" (the replay window of timestamped schemes, default "5m"),
//     and for the generic hmac scheme "header", "prefix", "encoding",
//     "algorithm", "timestamp_header" and "content". Without "scheme" the
//     object is read as older files wrote it: hmac when it has "header",
//     "prefix" or "encoding", else github.
//   - collector_config.event_type (required) and collector_config.payload
//     (required object, may be {}) form the template described below.
//
// Decoding is strict: unknown or duplicate fields and wrong JSON types are
// errors naming the field. Neither the token nor the secret ever appears in an
// error, in String or fmt output, or in a log record ([Webhook.LogValue]).
//
// # Collector templates
//
// A template string that starts with "${" and ends with "}" is a JMESPath
// expression over the request body (https://jmespath.org/specification.html);
// "${@}" is the whole body. The inner text is compiled when the file is
// loaded: a syntax error or an unknown function is a load error naming the
// field, such as collector_config.payload.ref. Every other string is literal
// text, with no interpolation: "Hello ${name}" stays as written. Objects and
// arrays are evaluated member by member; null, booleans and numbers are copied.
//
// An expression result keeps its JSON type; a path that does not exist gives
// null. The event_type must evaluate to a non-empty string. Expressions see
// only the body, not headers or query parameters.
//
// Numbers: expressions compare and compute on float64 values (all that
// go-jmespath understands), but a number taken from the body keeps the text
// it had there, even through filters, sort_by() or max(): 960885 stays an
// integer, 12345678901234567890 is not rounded, 1.0 stays 1.0. Only a value
// the body writes in two ways (1 and 1.0) is written in its shortest form,
// and a computed number that equals a body number written in a longer form
// takes that form. Other computed numbers (length(...), sum(...)) are written
// in their shortest form (3, not 3.0); a non-finite result is written as
// null. Numbers written in the template are copied as written: Tornado turns
// 123 into 123.0, Squall keeps 123 (equal by value). In an [Event], every
// number is a json.Number.
//
// # Events and errors
//
// [Collector.Collect] returns an [Event] whose metadata.tenant_id is the
// webhook's tenant_id if set, else the intake's tenant, else [DefaultTenant];
// [Event.AppendJSON] encodes it. [Collector.AppendEvent] gives the same JSON
// and errors at less cost: when the template's only expressions are ${@}, it
// writes the event straight from the body, without decoding it. Their errors
// map to HTTP statuses as follows:
//
//   - [ErrBodyNotJSON]: 400 Bad Request (the body is not one JSON value in
//     valid UTF-8; Tornado answers 500);
//   - [*TemplateError], including [ErrEventType]: 422 Unprocessable Content
//     (the body is JSON, but an expression failed at run time, for example
//     length() of a number, or the event type is not a string; Tornado
//     answers 500).
//
// A wrong or missing token is 401 (DESIGN decision 11); a body over
// MaxPayloadSize is 413; both are the intake's to check.
package webhooks
