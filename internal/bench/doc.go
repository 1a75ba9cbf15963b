// Package bench is the load generator of `squall bench`: it sends HTTP
// requests to a deployment the user owns and measures what comes back.
//
// # Method
//
// Each connection is a keep-alive HTTP/1.1 connection served by one
// goroutine, which writes the whole prebuilt request in one write and reads
// the answer with [net/http.ReadResponse], one request in flight at a time,
// as wrk does: no http.Client, no per-request goroutines, so that on a small
// machine the generator takes as little CPU as possible from the target.
//
// Latencies go into a log-linear [Histogram] (HdrHistogram's layout, at most
// 0.8% bucket width, no allocation per record). With a rate the load is
// open-loop: request k is due at start + k/rate, whatever became of the
// earlier ones, and its latency is measured from that due time, so that a
// target that stalls is charged for every request it kept waiting instead
// of the load quietly slowing down with it (coordinated omission). Requests
// that fall due within the duration but could not be started because every
// connection was busy are reported as missed.
//
// Every run is bounded: by its duration always, by a number of requests
// when given, and each request by its timeout.
//
// # Where it lives
//
// The package is private to cmd/squall: it is a client of the deployment.
// `squall bench findings` drives the same generator against a master.
// [Engine] (`squall bench engine`) writes events with the satellite's Kafka
// adapter, satellite/kafkasink (only Kafka adapters import kafka-go), and
// reads the engines' Prometheus metrics with prometheus/common's parser.
package bench
