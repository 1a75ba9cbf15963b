// Package action runs the actions that matched rules produce.
//
// A [Registry] maps action ids to [Executor]s. It is built explicitly from a
// [Config] by [NewRegistry] (no init-time registration), and [Registry.Run]
// dispatches one [tree.Action]: an unknown id fails with [ErrNoExecutor]
// ([ErrNotEnabled], saying what to configure, for a built-in executor the
// configuration leaves disabled: with [Default] only logger and foreach
// run, DESIGN decision 21); a
// retriable failure is retried with exponential backoff and jitter; a
// permanent one is returned at once. The caller (the engine, or the master
// for Full test events) decides what to do with a final failure: log it or
// dead-letter the event.
//
// A [Reloader] keeps a Registry built from the settings file and rebuilds
// it when the file changes ([Reloader.Watch]: the file's directory is
// watched with fsnotify, debounced, and read again periodically) or on
// demand ([Reloader.Reload], which cmd/squall calls on SIGHUP). The new
// registry is built in full before it is swapped in; a file that fails
// leaves the current one. Each registry counts the actions running on it
// and is closed only once the last of them has finished after it was
// replaced. The Reloader's registries share one set of metrics.
//
// # Errors
//
// Executors classify their failures with [NewRetriable] and [NewPermanent];
// [Retriable] reads the classification back. An unclassified error is
// permanent: an action is run again only when its executor says so.
// Payloads that break an executor's contract wrap [ErrInvalidPayload];
// paths that would leave their base directory wrap [ErrPathEscape].
//
// # Executors
//
// Payload contracts follow Tornado's executors (docs/migration.md lists
// the differences). Executors never modify a payload: it may share values
// with the event and the tree.
//
//   - logger: logs the action (id and payload) at info level. Any payload.
//   - archive: payload event (required, any JSON) and archive_type
//     (optional string). Appends event as one compact JSON line to
//     archive.base_path/<path>, where <path> is archive.paths[archive_type],
//     or archive.default_path when archive_type is absent or not a string.
//     "${name}" in the path is replaced by the payload's top-level string
//     field name. An unknown archive_type or a missing parameter is a
//     permanent error. The path must stay inside the base directory: ".."
//     elements and absolute paths are refused, and every file operation goes
//     through an [os.Root], so a symbolic link cannot lead out either.
//     Parent directories are created. Lines of one file never interleave.
//     Enabled when archive.base_path is set. Under a [WriteBatch] (the
//     engine's workers run every event under one) the lines are written
//     at [WriteBatch.Flush], one write(2) per file for the whole batch.
//   - script: payload script (string: the program, then leading arguments,
//     split on white space) and args (optional). The program must resolve,
//     symbolic links followed, inside script.allowed_dir; it runs with an
//     argument vector and never through a shell, with the environment of
//     script.env only, in allowed_dir, killed (with its process group) after
//     script.timeout. args flattens: a string is one argument; a number or
//     a bool its text; an array each element in turn; an object, key by key
//     in sorted order, "--key" then the value's arguments; null nothing.
//     Standard output and error (bounded by script.max_output) are logged.
//     A non-zero exit status, a timeout, or a program still open for
//     writing ("text file busy") is retriable; a program that cannot be
//     found or run is permanent. Enabled when script.allowed_dir is set.
//   - http: payload url (required), method (default POST), headers (object
//     of strings), body (any JSON). Without body, POST, PUT and PATCH send
//     the rest of the payload (without url, method and headers) as JSON, so
//     that "POST the payload as JSON" needs no body field and header secrets
//     never land in a body; GET, HEAD and DELETE send nothing. Redirects are
//     not followed. 2xx succeeds; 408, 425, 429, 5xx, network errors and
//     timeouts are retriable; other statuses are permanent ([StatusError]).
//     Header values, and the URL's query and user info, are never logged.
//     Enabled when http.allowed_hosts is set (names, *.domain or IP
//     addresses) or http.allow_any_host is true (logged as a warning); a
//     settings file whose http section does neither is refused.
//   - foreach: payload target (array) and actions (array of {id, payload}),
//     always enabled; its inner actions run only through enabled executors.
//     For each inner action, for each item of target, every string of the
//     payload is resolved against {"item": item}: a string that is exactly
//     "${item...}" becomes the value with its own type, an interpolated
//     string becomes text, and a string that cannot be resolved is kept as
//     it is. The produced actions, with the foreach's created_ms, run through
//     the registry in that order. Invalid inner actions are skipped (and
//     logged); nesting is bounded by foreach.max_depth.
//   - kafka: payload topic (string; default kafka.default_topic), key
//     (optional string) and value (any JSON; default the payload without
//     topic and key). The topic must be kafka.default_topic or in
//     kafka.allowed_topics. The message is written through [Deps.Producer]
//     (the engine's Kafka writer, acks=all); a producer failure is
//     retriable. Enabled when a topic is configured and Deps.Producer is set.
//   - finding: the payload is a credential finding, sent as the body of
//     PUT {master}/intel/api/sdk/v0/findings/credentials (docs/findings.md):
//     monitored_domain_id (integer, required), tool_code, resource_url,
//     username, password, hash, hash_algorithm (strings); other fields are
//     refused. The bearer token is read from finding.token_file when the
//     registry is built; its tenant claim decides the finding's tenant.
//     finding.master_urls are tried in order while failures are retriable.
//     201 and 200 (a repeat, from older masters) succeed; other 4xx are permanent
//     ([FindingError] carries the API's error code); 5xx, 429, network
//     errors and timeouts are retriable. Enabled when finding.master_urls
//     is set.
//   - elasticsearch: payload endpoint (string; default
//     elasticsearch.default_endpoint; must be it or in
//     elasticsearch.allowed_endpoints, the only hosts that receive the
//     credentials), index (string, required, printable UTF-8), data (any
//     JSON, required), auth (optional, {"type": "None"} to send no
//     credentials). The document is indexed through the official client's
//     transport and esapi packages (not its root package nor esutil, which
//     link its whole typed API): one batcher per endpoint, created on first
//     use, gathers the documents of concurrent actions into _bulk requests
//     ("create" operations without an id, as POST <index>/_doc/ does; the
//     index goes in the operation's metadata, not in a URL), at most
//     elasticsearch.workers in flight. A document is sent at once when no
//     flush is under way; those that arrive during one go together in the
//     next, so batches grow with the load. Every document is sent within
//     elasticsearch.flush_interval, or before elasticsearch.flush_bytes
//     would be buffered (elasticsearch.wait_for_batch makes documents wait
//     for these even when the batcher is idle). The action waits for its
//     own document's result: it succeeds once Elasticsearch indexed it.
//     Basic auth (username, password_file) or an API key (api_key_file)
//     come from the config, and ca_file replaces the system's certificate
//     authorities. A document refused with 408, 429 or 5xx, a whole _bulk
//     request refused so, network errors and timeouts
//     (elasticsearch.timeout per request) are retriable; other
//     refusals (400 mapping or parse errors, 401, 403...) are permanent;
//     errors carry Elasticsearch's error type and reason
//     ([ElasticsearchError]). [Registry.Close] flushes the documents
//     buffered. Enabled when an endpoint is configured. The token, password
//     and API key are never logged.
//
// # Configuration
//
// One JSON file, read by [Load] over [Default]; unknown fields are errors:
//
//	{
//	  "retry":   {"max_attempts": 5, "base_delay": "100ms", "max_delay": "10s", "jitter": 0.5},
//	  "archive": {"base_path": "/var/lib/squall/archive", "default_path": "/default/file.out",
//	              "paths": {"one": "/one/${key}/file.log"},
//	              "max_open_files": 64, "file_ttl": "1m"},
//	  "script":  {"allowed_dir": "/etc/squall/scripts", "timeout": "30s", "max_output": 65536,
//	              "env": {"PATH": "/usr/bin:/bin"}},
//	  "http":    {"timeout": "10s", "allowed_schemes": ["https"], "allowed_hosts": ["*.example.com"]},
//	  "foreach": {"max_depth": 4},
//	  "kafka":   {"default_topic": "squall.out", "allowed_topics": ["squall.alerts"]},
//	  "finding": {"master_urls": ["https://master-1:8080", "https://master-2:8080"],
//	              "token_file": "/etc/squall/finding.token", "timeout": "10s"},
//	  "elasticsearch": {"default_endpoint": "https://es.example.com:9200",
//	              "allowed_endpoints": ["https://es2.example.com:9200"],
//	              "username": "squall", "password_file": "/etc/squall/es.password",
//	              "api_key_file": "", "ca_file": "/etc/squall/es-ca.pem", "timeout": "10s",
//	              "flush_interval": "100ms", "flush_bytes": 1048576, "workers": 2,
//	              "wait_for_batch": false}
//	}
//
// # Metrics
//
// squall_action_executed_total, squall_action_failed_total (with a reason:
// permanent, exhausted or canceled), squall_action_retried_total and
// squall_action_duration_seconds (one observation per attempt) are labelled
// by action id; only registered ids are labels, and actions with an unknown
// id count in squall_action_unknown_total.
package action
