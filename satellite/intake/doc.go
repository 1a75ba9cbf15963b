// Package intake is the satellite's HTTP webhook endpoint:
//
//	POST /engine/webhook/event/{id}?token=…
//
// For each call the [Intake] finds the webhook (from the watcher's current
// set), checks the client address against its allow_ips (the peer, or the
// address a trusted proxy forwarded: Config.Clients), checks the token in
// constant time, takes the call from the webhook's rate_limit bucket, reads the body up to the
// webhook's max_payload_size, checks the optional signature (its scheme,
// secrets and replay window are in the webhook file), looks the delivery id
// up when the webhook has dedupe (Config.Dedupe: a repeat within the window
// is answered 200 with the first call's event id, header
// Squall-Deduplicated: true, and produces no event), turns the
// body into an event with the webhook's collector, and gives the event to
// its [Sink] as a Kafka [Record]: key = tenant id, value = the event JSON,
// headers squall-event-id (a UUIDv7), traceparent (the caller's, or a new
// trace), squall-webhook and squall-source. It answers 200 with
// {"event_id": "…"} only once the sink has the event acknowledged by Kafka
// or durably spooled.
//
// Every other answer has a JSON body {"code", "params", "message"}:
//
//	405 METHOD_NOT_ALLOWED  not POST (with Allow: POST)
//	404 WEBHOOK_NOT_FOUND   no webhook with this id
//	403 ADDRESS_NOT_ALLOWED the client address is not in allow_ips
//	401 UNAUTHORIZED        token missing or wrong
//	429 RATE_LIMITED        over the webhook's rate_limit (Retry-After:
//	                        when the bucket has a call again); the body is
//	                        not read
//	413 PAYLOAD_TOO_LARGE   body over max_payload_size; reading stops at the
//	                        limit and the connection is closed
//	401 INVALID_SIGNATURE   signature header missing or wrong
//	400 INVALID_SIGNATURE_HEADER  a signature, timestamp or id header
//	                        unparsable (not hex or base64, a non-numeric
//	                        timestamp) or longer than 4096 bytes
//	401 SIGNATURE_TIMESTAMP_OUT_OF_TOLERANCE  the signature matches but its
//	                        timestamp is outside the tolerance (a replay)
//	400 DELIVERY_ID_MISSING the webhook has dedupe and the call no id
//	400 INVALID_DELIVERY_ID the delivery id is longer than 256 bytes, or
//	                        its JMESPath gives neither a string nor a number
//	400 BODY_NOT_JSON       the body is not one JSON value
//	400 EVENT_TOO_DEEP      the event would nest deeper than the engines
//	                        evaluate (jsonlimit.MaxEventDepth)
//	422 TEMPLATE_ERROR      the template cannot make an event of this body
//	                        (params.field names the template entry)
//	413 EVENT_TOO_LARGE     the event is larger than a Kafka record may be
//	503 OVERLOADED          over one of the intake's bounds: calls in
//	                        progress (Config.MaxCalls; checked first, the
//	                        body is not read), bytes held for Kafka
//	                        (Config.MaxPendingBytes; checked before the
//	                        body is read and before the event is built)
//	                        or, on the server of [Intake.NewServer],
//	                        connections open (ServerConfig.MaxConns: the
//	                        listener answers it and closes the connection)
//	503 SPOOL_FULL          Kafka is unavailable and the spool is full
//	503 SHUTTING_DOWN       the satellite is stopping
//	503 UNAVAILABLE         the event could not be stored
//
// The checks run in this order, so an unauthenticated caller never gets its
// body read (but for the one byte the fasthttp server reads ahead). Accepted events are counted per webhook in
// squall_intake_accepted_total, repeated deliveries in
// squall_intake_deduplicated_total, refused calls of a known webhook by
// reason (token, signature, timestamp, address, rate, size, delivery_id) in
// squall_intake_refused_total; the index of the token and secret entry that
// verified a call, in squall_intake_credential_verified_total. 503 answers carry Retry-After. Connections are kept alive; after
// a 413 whose body was cut short the server closes the connection rather
// than read the rest.
//
// The intake has two front ends over one core: [Intake.ServeHTTP] for a
// net/http server (the master's and squall dev's), and [Intake.ServeFast] on
// the fasthttp server [Intake.NewServer] builds for the satellite's own
// listener (docs/decisions.md decision 42), which sends the other routes to
// a net/http handler and refuses requests whose body framing is ambiguous.
// Both give the same answers.
package intake
