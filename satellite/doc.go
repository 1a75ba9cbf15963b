// Package satellite is Squall's webhook intake near the event sources: it
// turns webhook calls into events and forwards them to Kafka, and what it
// accepts it delivers.
//
// A [Satellite] wires three parts, each in a subpackage named for what it
// wraps:
//
//   - [watcher] keeps the set of webhooks in step with a folder of webhook
//     files (fsnotify, debounce, full rescan, atomic swap; a bad file never
//     takes the others down);
//   - [intake] serves POST /engine/webhook/event/{id}?token=… and turns each
//     call into a Kafka record (key = tenant id, value = the event,
//     headers squall-event-id, traceparent, squall-webhook, squall-source);
//     the satellite's listener is its fasthttp server (HTTP/1.1, with the
//     other routes on a net/http mux behind it: docs/decisions.md decision
//     42), while [Satellite.Handler] and [Satellite.WebhookHandler] give the
//     net/http handlers for another server to mount;
//   - [kafkasink] writes records to Kafka with kafka-go (acks=all), and
//     [spool] keeps those Kafka has not taken on local disk.
//
// The intake applies the delivery guards of the webhook files with three
// more: [dedupe] remembers delivery ids (dedupe.db in the spool directory,
// opened and closed with the spool), [ratelimit] keeps the rate-limit
// buckets, and [clientaddr] finds a call's client address behind
// [Config.TrustedProxies].
//
// # Delivery
//
// A call is answered 200 {"event_id": …} only once its event is acknowledged
// by all in-sync replicas or written to the spool with fsync. The forwarder
// between the intake and Kafka has two modes. Direct: the call waits for
// Kafka, up to [Config.AckTimeout] (2 s); a failure or a timeout spools the
// event and switches to spooling. Spooling: every new event is appended to
// the spool (so that none overtakes the spooled ones: the order per tenant
// is kept), and a drain loop sends the spool to Kafka in order, in batches,
// with exponential backoff between failed attempts and a broker check before
// each attempt while Kafka is down; once the spool is empty, it switches
// back to direct. The spool survives restarts and kill -9; its bound
// ([spool.Config.MaxBytes]) turns into 503 SPOOL_FULL with Retry-After.
//
// Delivery is at least once: an event whose write timed out may also have
// reached Kafka, and an event sent from the spool just before a crash is
// sent again. Consumers deduplicate on the squall-event-id header. A
// webhook with "dedupe" also stops the producer's own retries: a repeated
// delivery id within the window is answered with the first event's id.
//
// # Lifecycle
//
// [New] validates the [Config] and registers the metrics; it starts
// nothing. [Satellite.Run] opens the spool, reads the webhook folder, starts
// watching it and draining the spool, listens on [Config.HTTPAddr], and
// blocks until its context ends. It then stops listening, answers the calls
// in progress, stops the drain, flushes and closes the Kafka writer, and
// closes the spool, within [Config.ShutdownTimeout].
//
// # Operations
//
// Besides the webhook endpoint the satellite serves /healthz (the process
// runs), /readyz (200 when the webhooks are loaded and the spool has room;
// the body is a [Status]: mode, Kafka health, spool depth, webhook counts)
// and /metrics (Prometheus: squall_intake_*, squall_webhooks_*,
// squall_forward_*, squall_kafka_*, squall_spool_*).
package satellite
