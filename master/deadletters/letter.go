package deadletters

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
)

// headerWebhook is the satellite's header naming the event's webhook.
const headerWebhook = "squall-webhook"

// headerEventID is the event's id.
const headerEventID = "squall-event-id"

// Letter is a dead letter as the API shows it.
type Letter struct {
	// ID is topic/partition/offset in the dead-letter topic.
	ID        string `json:"id"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	// DeadAt is when it was dead-lettered (squall-dead-at, else the
	// record's timestamp).
	DeadAt  time.Time `json:"dead_at"`
	Key     string    `json:"key"`
	EventID string    `json:"event_id,omitempty"`
	Webhook string    `json:"webhook,omitempty"`
	// Stage is decode, evaluate or action.
	Stage string `json:"stage"`
	// Reason groups dead letters: the stage, and for stage action the
	// ids of the failed actions ("action http").
	Reason string `json:"reason"`
	// Error is the error text (squall-error).
	Error     string   `json:"error"`
	Actions   []string `json:"actions,omitempty"`
	Rules     []string `json:"rules,omitempty"`
	Engine    string   `json:"engine,omitempty"`
	TreeIndex uint64   `json:"tree_index,omitempty"`
	// Origin is where the engine read the event: topic/partition/offset.
	Origin      string     `json:"origin,omitempty"`
	OriginTime  *time.Time `json:"origin_time,omitempty"`
	ReplayCount int        `json:"replay_count"`
	// ReplayOf is the dead letter this event's replay came from.
	ReplayOf string `json:"replay_of,omitempty"`
	// Replayed is set once it was replayed (when the request read its
	// marker).
	Replayed *Replay `json:"replayed,omitempty"`
	// Size is the event's size in bytes.
	Size int `json:"size"`

	// Shown by GET .../{topic}/{partition}/{offset} only: the headers,
	// and the event as JSON when it is JSON, else in base64.
	Headers     []Header        `json:"headers,omitempty"`
	Event       json.RawMessage `json:"event,omitempty"`
	EventBase64 string          `json:"event_base64,omitempty"`
}

// Header is a record header; Value is its text.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Replay says when a dead letter was replayed, and by whom.
type Replay struct {
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
	// Marker is the id of the marker that records it.
	Marker string `json:"marker"`
}

// marker returns the dead letter a replay marker records, if m is one.
func marker(topic string, m *kafkasource.Message) (string, *Replay, bool) {
	of, ok := m.Header(deadletter.HeaderReplayed)
	if !ok {
		return "", nil, false
	}
	rp := &Replay{Marker: deadletter.ID{Topic: topic, Partition: m.Partition(), Offset: m.Offset()}.String()}
	if by, ok := m.Header(deadletter.HeaderReplayBy); ok {
		rp.By = string(by)
	}
	rp.At = m.Time()
	if at, ok := m.Header(deadletter.HeaderDeadAt); ok {
		if t, err := time.Parse(time.RFC3339Nano, string(at)); err == nil {
			rp.At = t
		}
	}
	return string(of), rp, true
}

// parse reads a dead letter; full adds its headers and event.
func parse(topic string, m *kafkasource.Message, full bool) *Letter {
	l := &Letter{
		ID:        deadletter.ID{Topic: topic, Partition: m.Partition(), Offset: m.Offset()}.String(),
		Partition: m.Partition(),
		Offset:    m.Offset(),
		DeadAt:    m.Time(),
		Key:       string(m.Key()),
		Size:      len(m.Value()),
	}
	str := func(k string) string { v, _ := m.Header(k); return string(v) }
	l.EventID = str(headerEventID)
	l.Webhook = str(headerWebhook)
	l.Stage = str(deadletter.HeaderErrorStage)
	l.Error = str(deadletter.HeaderError)
	l.Engine = str(deadletter.HeaderEngine)
	l.Origin = str(deadletter.HeaderOrigin)
	l.ReplayOf = str(deadletter.HeaderReplayOf)
	if v := str(deadletter.HeaderErrorActions); v != "" {
		l.Actions = strings.Split(v, ",")
	}
	if v := str(deadletter.HeaderErrorRules); v != "" {
		l.Rules = strings.Split(v, ",")
	}
	l.TreeIndex, _ = strconv.ParseUint(str(deadletter.HeaderTreeIndex), 10, 64)
	if v := str(deadletter.HeaderDeadAt); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			l.DeadAt = t
		}
	}
	if v := str(deadletter.HeaderOriginTime); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			l.OriginTime = &t
		}
	}
	if v, ok := m.Header(deadletter.HeaderReplayCount); ok {
		l.ReplayCount = deadletter.ParseCount(v)
	}
	l.Reason = reasonOf(l.Stage, l.Actions)
	if full {
		for _, h := range m.Headers() {
			l.Headers = append(l.Headers, Header{Key: h.Key, Value: string(h.Value)})
		}
		if v := m.Value(); json.Valid(v) {
			l.Event = slices.Clone(v)
		} else {
			l.EventBase64 = base64.StdEncoding.EncodeToString(v)
		}
	}
	return l
}

// reasonOf is the group of a dead letter: its stage, and for stage action
// the ids of the failed actions, sorted ("action http,nagios").
func reasonOf(stage string, actions []string) string {
	if stage == "" {
		stage = "unknown"
	}
	if stage != deadletter.StageAction || len(actions) == 0 {
		return stage
	}
	ids := make([]string, 0, len(actions))
	for _, a := range actions {
		_, id, _ := strings.Cut(a, ":")
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return stage + " " + strings.Join(ids, ",")
}
