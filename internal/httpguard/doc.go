// Package httpguard bounds what an HTTP request costs a Squall server
// before and after it is authenticated, and how its failures are logged.
// Every role (master, satellite, engine, squall dev) uses it, so that the
// limits and the log lines are the same everywhere:
//
//   - [BodyDeadline] gives each request body a read deadline: a client that
//     sends its body one byte at a time is cut off, while long polls, which
//     read no body and answer late, are not;
//   - [Discard] reads and drops what is left of a refused body, up to a
//     bound of bytes and time, so that clients that write the whole body
//     before reading the answer see the answer rather than a broken pipe;
//   - [ClientErrors] logs client errors (4xx) at debug level and a summary
//     of them, by status and code, at most once per interval at info level;
//   - [Recover] answers a handler's panic with a JSON 500 naming a request
//     id, and logs the panic with its stack under that id: no request is
//     ever answered by a dropped connection.
package httpguard
