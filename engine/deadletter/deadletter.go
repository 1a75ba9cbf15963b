// Package deadletter is the form of a dead letter: the record an engine
// writes to the dead-letter topic when it cannot finish an event, the
// headers that say why and where it came from, and the headers of its
// replay. The engine writes them; the masters' dead-letter API
// (master/deadletters) reads and replays them. docs/operations.md
// ("Dead letters") lists them for operators.
//
// A dead letter is the original record (key, value, headers) with these
// headers added (any of them the original carried is replaced):
//
//   - squall-error: the reason, the error text (at most 4 KiB);
//   - squall-error-stage: decode, evaluate or action;
//   - squall-error-actions: the failed actions, "index:id" separated by
//     commas (stage action only);
//   - squall-error-rules: their positions in the tree, the rule path and
//     the action's index ("root/alerts/notify/0"), separated by commas
//     (stage action only);
//   - squall-tree-index: the index of the tree the event was evaluated
//     against;
//   - squall-engine: the id of the engine that dead-lettered it;
//   - squall-dead-at: when, RFC 3339 with nanoseconds (UTC); the record's
//     timestamp is that time too, so that the topic's retention counts
//     from it;
//   - squall-origin: where the event was read, topic/partition/offset;
//     squall-origin-time: the original record's timestamp (RFC 3339).
//
// A replay (the masters produce a dead letter back to the events topic)
// drops those headers and adds:
//
//   - squall-replay-count: how many times the event was replayed, this
//     time included (a dead letter of a replayed event carries the count
//     of the replay it came from);
//   - squall-replay-of: the [ID] of the dead letter replayed; engines
//     deduplicate a replayed event by its squall-event-id and this id
//     together, so that two replays of one dead letter run once;
//   - squall-replay-by: the user who asked for it.
//
// A replay is recorded in the dead-letter topic itself by a marker: a
// record with an empty value in the partition of the dead letter it
// replays, whose squall-replayed header is that dead letter's [ID] (with
// squall-replay-by and squall-dead-at, here the time of the replay).
// Markers are not dead letters: readers of the topic skip them.
package deadletter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Headers of a dead letter.
const (
	HeaderError        = "squall-error"
	HeaderErrorStage   = "squall-error-stage"
	HeaderErrorActions = "squall-error-actions"
	HeaderErrorRules   = "squall-error-rules"
	HeaderTreeIndex    = "squall-tree-index"
	HeaderEngine       = "squall-engine"
	HeaderDeadAt       = "squall-dead-at"
	HeaderOrigin       = "squall-origin"
	HeaderOriginTime   = "squall-origin-time"
)

// Headers of a replayed event and of a replay marker.
const (
	HeaderReplayCount = "squall-replay-count"
	HeaderReplayOf    = "squall-replay-of"
	HeaderReplayBy    = "squall-replay-by"
	HeaderReplayed    = "squall-replayed"
)

// Stages of HeaderErrorStage.
const (
	StageDecode   = "decode"
	StageEvaluate = "evaluate"
	StageAction   = "action"
)

// Reason headers: those a dead letter gets, which a new dead letter of
// the same event replaces and a replay drops.
var reasonHeaders = []string{HeaderError, HeaderErrorStage, HeaderErrorActions, HeaderErrorRules,
	HeaderTreeIndex, HeaderEngine, HeaderDeadAt, HeaderOrigin, HeaderOriginTime}

// IsReason reports whether key is one of the headers a dead letter adds.
func IsReason(key string) bool {
	for _, h := range reasonHeaders {
		if key == h {
			return true
		}
	}
	return false
}

// IsReplay reports whether key is one of the headers a replay adds.
func IsReplay(key string) bool {
	switch key {
	case HeaderReplayCount, HeaderReplayOf, HeaderReplayBy, HeaderReplayed:
		return true
	}
	return false
}

// ID names a record of a topic: topic/partition/offset.
type ID struct {
	Topic     string
	Partition int
	Offset    int64
}

// String returns "topic/partition/offset".
func (id ID) String() string {
	return id.Topic + "/" + strconv.Itoa(id.Partition) + "/" + strconv.FormatInt(id.Offset, 10)
}

// ParseID parses "topic/partition/offset".
func ParseID(s string) (ID, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return ID{}, fmt.Errorf("id %q: want topic/partition/offset", s)
	}
	j := strings.LastIndexByte(s[:i], '/')
	if j <= 0 {
		return ID{}, fmt.Errorf("id %q: want topic/partition/offset", s)
	}
	topic, ps, os := s[:j], s[j+1:i], s[i+1:]
	p, err1 := strconv.Atoi(ps)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err := errors.Join(err1, err2); err != nil || p < 0 || o < 0 || strings.ContainsAny(topic, "/ ") {
		return ID{}, fmt.Errorf("id %q: want topic/partition/offset with a partition and an offset of at least 0", s)
	}
	return ID{Topic: topic, Partition: p, Offset: o}, nil
}

// ParseCount parses a squall-replay-count value; a missing or bad value
// counts 0.
func ParseCount(v []byte) int {
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
