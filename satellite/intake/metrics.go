package intake

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// metrics are the intake's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	inflight prometheus.GaugeFunc
	// pending is the bytes the calls in progress hold for Kafka.
	pending prometheus.GaugeFunc
	// refused counts refused calls of known webhooks by reason.
	refused *prometheus.CounterVec
	// credentials counts the token and secret entries that verified.
	credentials *prometheus.CounterVec
	// accepted counts the events accepted, by webhook.
	accepted *prometheus.CounterVec
	// deduplicated counts repeated deliveries answered with the first
	// event's id, by webhook.
	deduplicated *prometheus.CounterVec
	// panics counts the requests whose handler panicked.
	panics prometheus.Counter

	// byWebhook caches, by webhook id, the counters every accepted call
	// adds to (*webhookCounters), so that such a call looks up no label
	// values. Ids are those of known webhooks only, as in the series.
	byWebhook sync.Map
}

// webhookCounters are the counters of one webhook that an accepted call
// with its first token adds to.
type webhookCounters struct {
	ok       prometheus.Counter // requests{code="200"}
	accepted prometheus.Counter
	token0   prometheus.Counter // credentials{credential="token",index="0"}
}

// webhook returns the counters of the webhook with the given id.
func (m *metrics) webhook(id string) *webhookCounters {
	if c, ok := m.byWebhook.Load(id); ok {
		return c.(*webhookCounters)
	}
	c, _ := m.byWebhook.LoadOrStore(id, &webhookCounters{
		ok:       m.requests.WithLabelValues(id, "200"),
		accepted: m.accepted.WithLabelValues(id),
		token0:   m.credentials.WithLabelValues(id, credentialToken, "0"),
	})
	return c.(*webhookCounters)
}

// Kinds of credential of the squall_intake_credential_verified_total metric.
const (
	credentialToken  = "token"
	credentialSecret = "secret"
)

// credentialVerified counts a call that entry index of the webhook's tokens
// or secrets verified.
func (m *metrics) credentialVerified(webhook, kind string, index int) {
	if kind == credentialToken && index == 0 {
		m.webhook(webhook).token0.Inc()
		return
	}
	idx := "0"
	if index != 0 {
		idx = strconv.Itoa(index)
	}
	m.credentials.WithLabelValues(webhook, kind, idx).Inc()
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing. inflight returns the number of calls in progress,
// pending the bytes they hold for Kafka.
func newMetrics(reg prometheus.Registerer, inflight, pending func() float64) (*metrics, error) {
	m := &metrics{
		panics:   metricset.Counter("squall_intake_http_panics_total", "Requests whose handler panicked: each was answered 500 with a request id, and logged with its stack under that id."),
		requests: metricset.CounterVec("squall_intake_requests_total", "Webhook calls, by webhook id (empty when the id is unknown) and HTTP status.", "webhook", "code"),
		// 100µs to ~3.3s.
		duration:     metricset.Histogram("squall_intake_request_duration_seconds", "Time to answer a webhook call, Kafka acknowledgement or spool write included.", prometheus.ExponentialBuckets(0.0001, 2, 16)),
		inflight:     metricset.GaugeFunc("squall_intake_in_flight_requests", "Webhook calls being handled.", inflight),
		pending:      metricset.GaugeFunc("squall_intake_pending_bytes", "Bytes of bodies and events the webhook calls in progress hold until Kafka acknowledges or the spool takes them; bounded by --max-pending-bytes.", pending),
		refused:      metricset.CounterVec("squall_intake_refused_total", "Calls of a known webhook refused, by webhook id and reason (token, signature, timestamp, address, rate, size, delivery_id).", "webhook", "reason"),
		credentials:  metricset.CounterVec("squall_intake_credential_verified_total", "Calls whose token or signature verified, by webhook id, credential (token, secret) and index of the entry in the webhook file's tokens or secrets.", "webhook", "credential", "index"),
		accepted:     metricset.CounterVec("squall_intake_accepted_total", "Events accepted (acknowledged by Kafka or spooled), by webhook id.", "webhook"),
		deduplicated: metricset.CounterVec("squall_intake_deduplicated_total", "Repeated deliveries of a webhook with dedupe, answered 200 with the first call's event id and no new event, by webhook id.", "webhook"),
	}
	if _, err := metricset.Register(reg, m.requests, m.duration, m.inflight, m.pending, m.refused, m.credentials, m.accepted, m.deduplicated, m.panics); err != nil {
		return nil, fmt.Errorf("register intake metrics: %w", err)
	}
	return m, nil
}
