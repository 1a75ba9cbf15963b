package deadletters

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/master/auth"
)

// Filter selects dead letters; zero fields select all.
type Filter struct {
	// Stage is decode, evaluate or action.
	Stage string `json:"stage,omitempty"`
	// Reason is a reason group, exactly ("action http").
	Reason string `json:"reason,omitempty"`
	// Error is a text the error holds (case-insensitive).
	Error string `json:"error,omitempty"`
	// Webhook is the event's webhook (squall-webhook).
	Webhook string `json:"webhook,omitempty"`
	// Since and Until bound the time it was dead-lettered: RFC 3339, or
	// a duration before now ("1h").
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`

	since, until time.Time
}

// compile checks the filter and resolves its times.
func (f *Filter) compile(now time.Time) error {
	switch f.Stage {
	case "", deadletter.StageDecode, deadletter.StageEvaluate, deadletter.StageAction:
	default:
		return badRequest("stage %q: want decode, evaluate or action", f.Stage)
	}
	var err error
	if f.since, err = parseTime("since", f.Since, now); err != nil {
		return err
	}
	if f.until, err = parseTime("until", f.Until, now); err != nil {
		return err
	}
	if !f.since.IsZero() && !f.until.IsZero() && f.until.Before(f.since) {
		return badRequest("until %s is before since %s", f.Until, f.Since)
	}
	return nil
}

// parseTime reads an RFC 3339 time or a duration before now.
func parseTime(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, badRequest("%s %q: want an RFC 3339 time or a duration before now (e.g. 1h)", name, v)
}

// match reports whether the filter selects l.
func (f *Filter) match(l *Letter) bool {
	switch {
	case f.Stage != "" && l.Stage != f.Stage,
		f.Reason != "" && l.Reason != f.Reason,
		f.Webhook != "" && l.Webhook != f.Webhook,
		f.Error != "" && !strings.Contains(strings.ToLower(l.Error), strings.ToLower(f.Error)),
		!f.since.IsZero() && l.DeadAt.Before(f.since),
		!f.until.IsZero() && l.DeadAt.After(f.until):
		return false
	}
	return true
}

// Page is the answer of GET /squall/v1/deadletters.
type Page struct {
	DeadLetters []*Letter `json:"dead_letters"`
	// Reasons counts the matching dead letters the request read, by
	// reason, the most frequent first.
	Reasons []ReasonCount `json:"reasons"`
	// Matched counts them; Scanned counts the records read.
	Matched int `json:"matched"`
	Scanned int `json:"scanned"`
	// Complete is true when the request read every partition to its
	// end; false when a scan limit stopped it (Next continues).
	Complete bool `json:"complete"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// ReasonCount is a reason and how many dead letters have it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Stage  string `json:"stage"`
	Count  int    `json:"count"`
	// Example is the error of the first of them.
	Example string `json:"example"`
}

// cursor is a position of the scan: the partitions before Partition
// are done, Partition continues at Offset.
type cursor struct {
	partition int
	offset    int64
}

func (c cursor) String() string {
	return strconv.Itoa(c.partition) + "-" + strconv.FormatInt(c.offset, 10)
}

func parseCursor(s string) (cursor, error) {
	ps, os, ok := strings.Cut(s, "-")
	p, err1 := strconv.Atoi(ps)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return cursor{}, badRequest("cursor %q: not a cursor of this API", s)
	}
	return cursor{p, o}, nil
}

// listQuery is what GET /squall/v1/deadletters reads.
var listParams = []string{"stage", "reason", "error", "webhook", "since", "until", "limit", "cursor"}

func (a *API) serveList(ctx context.Context, r *http.Request, _ *auth.Claims) (any, error) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(listParams, k) {
			return nil, badRequest("unknown parameter %q (known: %s)", k, strings.Join(listParams, ", "))
		}
	}
	f := Filter{Stage: q.Get("stage"), Reason: q.Get("reason"), Error: q.Get("error"), Webhook: q.Get("webhook"),
		Since: q.Get("since"), Until: q.Get("until")}
	if err := f.compile(a.cfg.Now()); err != nil {
		return nil, err
	}
	limit := DefaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return nil, badRequest("limit %q: want 1 to %d", v, MaxPageSize)
		}
		limit = n
	}
	var from *cursor
	if v := q.Get("cursor"); v != "" {
		c, err := parseCursor(v)
		if err != nil {
			return nil, err
		}
		from = &c
	}
	return a.list(ctx, &f, limit, from)
}

// list scans the topic from the cursor (or the start of the filter's
// time) and returns the first limit matching dead letters.
func (a *API) list(ctx context.Context, f *Filter, limit int, from *cursor) (*Page, error) {
	parts, err := a.log.Partitions(ctx, a.cfg.Topic)
	if err != nil {
		return nil, err
	}
	page := &Page{DeadLetters: []*Letter{}, Reasons: []ReasonCount{}, Complete: true}
	counts := map[string]*ReasonCount{}
	replays := map[string]*Replay{}
	budget := a.cfg.ScanBytes
	var next *cursor
	for _, pr := range parts {
		start := pr.First
		if from != nil {
			if pr.Partition < from.partition {
				continue
			}
			if pr.Partition == from.partition {
				start = max(start, from.offset)
			}
		}
		if !f.since.IsZero() && (from == nil || pr.Partition != from.partition) {
			// Records are stamped with the time they died: none
			// before this offset died at or after since.
			off, err := a.log.OffsetAt(ctx, a.cfg.Topic, pr.Partition, f.since)
			if err != nil {
				return nil, err
			}
			start = max(start, off)
		}
		stopped := false
		end, err := a.log.Read(ctx, a.cfg.Topic, pr.Partition, start, pr.End, budget, func(m *kafkasource.Message) bool {
			if page.Scanned >= a.cfg.ScanLimit {
				stopped = true
				return false
			}
			page.Scanned++
			budget -= len(m.Key()) + len(m.Value())
			if of, rp, ok := marker(a.cfg.Topic, m); ok {
				replays[of] = rp
				return true
			}
			l := parse(a.cfg.Topic, m, false)
			if !f.match(l) {
				return true
			}
			page.Matched++
			rc := counts[l.Reason]
			if rc == nil {
				rc = &ReasonCount{Reason: l.Reason, Stage: l.Stage, Example: l.Error}
				counts[l.Reason] = rc
			}
			rc.Count++
			if len(page.DeadLetters) < limit {
				page.DeadLetters = append(page.DeadLetters, l)
			} else if next == nil {
				next = &cursor{pr.Partition, m.Offset()}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		if stopped || end < pr.End {
			// A limit stopped the scan (records, or bytes: the reader
			// stops before the end).
			page.Complete = false
			if next == nil {
				next = &cursor{pr.Partition, end}
				if stopped {
					next.offset = end - 1 // the record read but not counted
				}
			}
			break
		}
	}
	for _, l := range page.DeadLetters {
		l.Replayed = replays[l.ID]
	}
	for _, rc := range counts {
		page.Reasons = append(page.Reasons, *rc)
	}
	slices.SortFunc(page.Reasons, func(x, y ReasonCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), strings.Compare(x.Reason, y.Reason))
	})
	if next != nil {
		page.Next = next.String()
	}
	return page, nil
}

// serveShow answers one dead letter, with its headers and event.
func (a *API) serveShow(ctx context.Context, r *http.Request, _ *auth.Claims) (any, error) {
	raw := r.PathValue("topic") + "/" + r.PathValue("partition") + "/" + r.PathValue("offset")
	id, err := deadletter.ParseID(raw)
	if err != nil {
		return nil, badRequest("%s", err)
	}
	letters, _, err := a.fetch(ctx, []deadletter.ID{id}, true)
	if err != nil {
		return nil, err
	}
	l, ok := letters[id.String()]
	if !ok {
		return nil, notFound(id.String(), "no dead letter %s in %s", id, a.cfg.Topic)
	}
	return l, nil
}

// fetch reads the dead letters of ids and the replay markers that follow
// them in their partitions. checked lists the ids whose partition was
// read to its end: for those, a missing marker means never replayed.
func (a *API) fetch(ctx context.Context, ids []deadletter.ID, full bool) (letters map[string]*Letter, checked map[string]bool, err error) {
	letters, checked = map[string]*Letter{}, map[string]bool{}
	byPart := map[int][]deadletter.ID{}
	for _, id := range ids {
		if id.Topic == a.cfg.Topic {
			byPart[id.Partition] = append(byPart[id.Partition], id)
		}
	}
	if len(byPart) == 0 {
		return letters, checked, nil
	}
	parts, err := a.log.Partitions(ctx, a.cfg.Topic)
	if err != nil {
		return nil, nil, err
	}
	scanned, budget := 0, a.cfg.ScanBytes
	replays := map[string]*Replay{}
	for _, pr := range parts {
		want := byPart[pr.Partition]
		if len(want) == 0 {
			continue
		}
		from := slices.MinFunc(want, func(x, y deadletter.ID) int { return cmp.Compare(x.Offset, y.Offset) }).Offset
		wanted := map[int64]bool{}
		for _, id := range want {
			wanted[id.Offset] = true
		}
		stopped := false
		end, err := a.log.Read(ctx, a.cfg.Topic, pr.Partition, from, pr.End, budget, func(m *kafkasource.Message) bool {
			if scanned >= a.cfg.ScanLimit {
				stopped = true
				return false
			}
			scanned++
			budget -= len(m.Key()) + len(m.Value())
			if of, rp, ok := marker(a.cfg.Topic, m); ok {
				replays[of] = rp
				return true
			}
			if wanted[m.Offset()] {
				l := parse(a.cfg.Topic, m, full)
				letters[l.ID] = l
			}
			return true
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read %s/%d: %w", a.cfg.Topic, pr.Partition, err)
		}
		if !stopped && end >= pr.End {
			for _, id := range want {
				checked[id.String()] = true
			}
		}
	}
	for id, l := range letters {
		l.Replayed = replays[id]
	}
	return letters, checked, nil
}
