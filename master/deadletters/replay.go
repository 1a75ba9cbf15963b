package deadletters

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
)

// maxReplayBody bounds a replay request's body.
const maxReplayBody = 256 << 10

// ReplayRequest is the body of POST /squall/v1/deadletters/replay: ids,
// or a filter (with at most Limit of the dead letters it selects, by
// default and at most Config.MaxReplayBatch).
type ReplayRequest struct {
	IDs    []string `json:"ids,omitempty"`
	Filter *Filter  `json:"filter,omitempty"`
	Limit  int      `json:"limit,omitempty"`
}

// Replay outcomes.
const (
	StatusReplayed        = "replayed"
	StatusAlreadyReplayed = "already_replayed"
	StatusRefused         = "refused"
	StatusNotFound        = "not_found"
	StatusFailed          = "failed"
)

// ReplayResult is the outcome of one dead letter.
type ReplayResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Reason says why it was not replayed, or what went wrong after.
	Reason string `json:"reason,omitempty"`
	// ReplayCount is the count the replay carries (or would have).
	ReplayCount int     `json:"replay_count,omitempty"`
	Replayed    *Replay `json:"replayed,omitempty"`
}

// ReplayAnswer is the answer of a replay request.
type ReplayAnswer struct {
	Results  []ReplayResult `json:"results"`
	Replayed int            `json:"replayed"`
}

func (a *API) serveReplay(ctx context.Context, r *http.Request, claims *auth.Claims) (any, error) {
	var req ReplayRequest
	if _, err := apierror.DecodeJSON(nil, r, maxReplayBody, jsonlimit.Limits{}, &req); err != nil {
		return nil, err
	}
	if (len(req.IDs) == 0) == (req.Filter == nil) {
		return nil, badRequest("give ids or a filter, not both")
	}
	if req.Limit < 0 || req.Limit > a.cfg.MaxReplayBatch {
		return nil, badRequest("limit %d: want 1 to %d", req.Limit, a.cfg.MaxReplayBatch)
	}
	if len(req.IDs) > a.cfg.MaxReplayBatch {
		return nil, badRequest("%d ids: at most %d in one request", len(req.IDs), a.cfg.MaxReplayBatch)
	}
	var ids []deadletter.ID
	for _, s := range req.IDs {
		id, err := deadletter.ParseID(s)
		if err != nil {
			return nil, badRequest("%s", err)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	// One replay request at a time: a second replay of a dead letter
	// reads the marker the first one wrote.
	a.replayMu.Lock()
	defer a.replayMu.Unlock()
	if req.Filter != nil {
		if err := req.Filter.compile(a.cfg.Now()); err != nil {
			return nil, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = a.cfg.MaxReplayBatch
		}
		page, err := a.list(ctx, req.Filter, limit, nil)
		if err != nil {
			return nil, err
		}
		for _, l := range page.DeadLetters {
			if l.Replayed == nil {
				id, _ := deadletter.ParseID(l.ID)
				ids = append(ids, id)
			}
		}
	}
	return a.replay(ctx, ids, claims.User)
}

// replay replays the dead letters of ids, in order.
func (a *API) replay(ctx context.Context, ids []deadletter.ID, user string) (*ReplayAnswer, error) {
	letters, checked, err := a.fetch(ctx, ids, true)
	if err != nil {
		return nil, err
	}
	ans := &ReplayAnswer{Results: make([]ReplayResult, 0, len(ids))}
	for _, id := range ids {
		res := a.replayOne(ctx, id, letters[id.String()], checked[id.String()], user)
		a.replays.WithLabelValues(res.Status).Inc()
		if res.Status == StatusReplayed {
			ans.Replayed++
		}
		ans.Results = append(ans.Results, res)
	}
	return ans, nil
}

// replayOne replays one dead letter l (nil: not found): the event to the
// events topic, then the marker to the dead letter's partition.
func (a *API) replayOne(ctx context.Context, id deadletter.ID, l *Letter, checked bool, user string) ReplayResult {
	res := ReplayResult{ID: id.String()}
	switch {
	case id.Topic != a.cfg.Topic:
		res.Status, res.Reason = StatusNotFound, fmt.Sprintf("not the dead-letter topic %s", a.cfg.Topic)
		return res
	case l == nil:
		res.Status, res.Reason = StatusNotFound, "no dead letter at this offset (deleted by retention, a replay marker, or past the end)"
		return res
	case l.Replayed != nil:
		res.Status, res.Replayed = StatusAlreadyReplayed, l.Replayed
		res.Reason = fmt.Sprintf("replayed at %s by %s", l.Replayed.At.Format(time.RFC3339), l.Replayed.By)
		return res
	case !checked:
		res.Status = StatusRefused
		res.Reason = fmt.Sprintf("more than the scan limit (%d records or %d bytes) follow it in its partition: whether it was replayed cannot be checked", a.cfg.ScanLimit, a.cfg.ScanBytes)
		return res
	}
	res.ReplayCount = l.ReplayCount + 1
	if l.ReplayCount >= a.cfg.MaxReplays {
		res.Status = StatusRefused
		res.Reason = fmt.Sprintf("the event was replayed %d times, the most allowed (--deadletters-max-replays %d): it stays dead", l.ReplayCount, a.cfg.MaxReplays)
		return res
	}
	if err := a.limit.Wait(ctx); err != nil {
		res.Status, res.Reason = StatusFailed, "rate limit: not replayed within the request's time; ask again"
		return res
	}
	now := a.cfg.Now().UTC()
	headers := make([]kafkasource.Header, 0, len(l.Headers)+3)
	for _, h := range l.Headers {
		if !deadletter.IsReason(h.Key) && !deadletter.IsReplay(h.Key) {
			headers = append(headers, kafkasource.Header{Key: h.Key, Value: []byte(h.Value)})
		}
	}
	headers = append(headers,
		kafkasource.Header{Key: deadletter.HeaderReplayCount, Value: strconv.AppendInt(nil, int64(res.ReplayCount), 10)},
		kafkasource.Header{Key: deadletter.HeaderReplayOf, Value: []byte(id.String())},
		kafkasource.Header{Key: deadletter.HeaderReplayBy, Value: []byte(user)})
	value := []byte(l.Event)
	if l.Event == nil {
		value = decodeBase64(l.EventBase64)
	}
	event := kafkasource.Record{Topic: a.cfg.EventsTopic, Key: []byte(l.Key), Value: value, Headers: headers}
	if err := a.prod.Write(ctx, event); err != nil {
		res.Status, res.Reason = StatusFailed, fmt.Sprintf("produce to %s: %v", a.cfg.EventsTopic, err)
		return res
	}
	res.Status = StatusReplayed
	mark := kafkasource.Record{Topic: a.cfg.Topic, Key: []byte(l.Key), ToPartition: true, Partition: id.Partition, Time: now,
		Headers: []kafkasource.Header{
			{Key: deadletter.HeaderReplayed, Value: []byte(id.String())},
			{Key: deadletter.HeaderReplayBy, Value: []byte(user)},
			{Key: deadletter.HeaderDeadAt, Value: now.AppendFormat(nil, time.RFC3339Nano)},
			{Key: deadletter.HeaderReplayCount, Value: strconv.AppendInt(nil, int64(res.ReplayCount), 10)},
		}}
	if err := a.prod.Write(ctx, mark); err != nil {
		// The event is replayed; without its marker a later replay may
		// produce it again, which the engines' dedupe window skips.
		res.Reason = fmt.Sprintf("replayed, but its marker was not written (%v): a second replay would produce it again", err)
		a.logger.WarnContext(ctx, "replay marker not written", "id", id.String(), "error", err)
	}
	a.logger.InfoContext(ctx, "dead letter replayed", "id", id.String(), "user", user, "replay_count", res.ReplayCount)
	return res
}
