package deadletters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master/auth"
)

const (
	testDLQ    = "squall.events.dlq"
	testEvents = "squall.events"
)

// world is a kfake broker with the two topics, an API over it and its
// HTTP server.
type world struct {
	t      testing.TB
	broker *kafkatest.Broker
	writer *kafkasource.Writer
	api    *API
	srv    *httptest.Server
}

func newWorld(t testing.TB, cfg Config) *world {
	t.Helper()
	w := &world{t: t}
	w.broker = kafkatest.Start(t, kafkatest.Config{Topics: []string{testDLQ, testEvents}, Partitions: 2})
	dial := kafkasource.Dial{Brokers: []string{w.broker.Addr}, Timeout: 2 * time.Second}
	reader, err := kafkasource.NewReader(dial)
	if err != nil {
		t.Fatal(err)
	}
	if w.writer, err = kafkasource.NewWriter(kafkasource.WriterConfig{Dial: dial, Topic: testEvents}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.writer.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg.Topic, cfg.EventsTopic = testDLQ, testEvents
	if w.api, err = New(cfg, reader, w.writer, &auth.Verifier{AllowUnsigned: true}, nil); err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewServer(w.api.Handler())
	t.Cleanup(w.srv.Close)
	return w
}

// token returns an unsigned token with roles on the root.
func token(roles ...string) string {
	return "Bearer " + auth.EncodeUnsigned(auth.Claims{User: "ops", Auths: map[string]auth.Authorization{
		"all": {Path: []string{"root"}, Roles: roles},
	}})
}

var admin = token(string(auth.Admin))

// letter is a dead letter to write.
type letter struct {
	key, webhook, stage, actions, err string
	count                             int
	deadAt                            time.Time
}

// deadLetter writes dead letters as an engine does.
func (w *world) deadLetter(ls ...letter) {
	w.t.Helper()
	for i, l := range ls {
		at := l.deadAt
		if at.IsZero() {
			at = time.Now().UTC()
		}
		hs := []kafkasource.Header{
			{Key: headerEventID, Value: fmt.Appendf(nil, "ev-%s-%d-%d", l.key, i, at.UnixNano())},
			{Key: headerWebhook, Value: []byte(l.webhook)},
			{Key: deadletter.HeaderError, Value: []byte(l.err)},
			{Key: deadletter.HeaderErrorStage, Value: []byte(l.stage)},
			{Key: deadletter.HeaderDeadAt, Value: []byte(at.Format(time.RFC3339Nano))},
			{Key: deadletter.HeaderOrigin, Value: []byte("squall.events/0/7")},
			{Key: deadletter.HeaderEngine, Value: []byte("engine-1")},
		}
		if l.actions != "" {
			hs = append(hs, kafkasource.Header{Key: deadletter.HeaderErrorActions, Value: []byte(l.actions)})
		}
		if l.count > 0 {
			hs = append(hs, kafkasource.Header{Key: deadletter.HeaderReplayCount, Value: fmt.Appendf(nil, "%d", l.count)})
		}
		rec := kafkasource.Record{Topic: testDLQ, Key: []byte(l.key), Value: fmt.Appendf(nil, `{"type":"alert","n":%d}`, i), Headers: hs, Time: at}
		if err := w.writer.Write(w.t.Context(), rec); err != nil {
			w.t.Fatal(err)
		}
	}
}

// do sends a request and decodes the JSON answer into out.
func (w *world) do(method, path, authz string, body any, out any) int {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(w.t.Context(), method, w.srv.URL+path, rd)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, b := calltest.Do(w.t, calltest.Client().Do, req)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		w.t.Fatalf("%s %s: content type %q: %s", method, path, ct, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			w.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (w *world) list(query string) *Page {
	w.t.Helper()
	var p Page
	if code := w.do(http.MethodGet, Prefix+query, admin, nil, &p); code != http.StatusOK {
		w.t.Fatalf("list %s: %d", query, code)
	}
	return &p
}

func (w *world) replay(req ReplayRequest) *ReplayAnswer {
	w.t.Helper()
	var a ReplayAnswer
	if code := w.do(http.MethodPost, Prefix+"/replay", admin, req, &a); code != http.StatusOK {
		w.t.Fatalf("replay %+v: %d", req, code)
	}
	return &a
}

func TestAPI_List(t *testing.T) {
	t.Parallel()
	cfg := Default()
	w := newWorld(t, cfg)
	old := time.Now().Add(-2 * time.Hour).UTC()
	w.deadLetter(
		letter{key: "a", webhook: "github", stage: "action", actions: "0:http", err: "action 0 (http): 500 down", deadAt: old},
		letter{key: "b", webhook: "github", stage: "action", actions: "0:http,1:archive", err: "action 0 (http): 500 down; action 1 (archive): disk full"},
		letter{key: "a", webhook: "nagios", stage: "decode", err: "not an event: invalid character"},
		letter{key: "c", webhook: "github", stage: "action", actions: "1:http", err: "action 1 (http): timeout"},
	)

	p := w.list("")
	if len(p.DeadLetters) != 4 || p.Matched != 4 || !p.Complete || p.Next != "" {
		t.Fatalf("page: %d letters, matched %d, complete %v, next %q", len(p.DeadLetters), p.Matched, p.Complete, p.Next)
	}
	wantReasons := []ReasonCount{{Reason: "action http", Stage: "action", Count: 2}, {Reason: "action archive,http", Stage: "action", Count: 1}, {Reason: "decode", Stage: "decode", Count: 1}}
	if len(p.Reasons) != len(wantReasons) {
		t.Fatalf("reasons %+v, want %+v", p.Reasons, wantReasons)
	}
	for i, rc := range p.Reasons {
		if rc.Reason != wantReasons[i].Reason || rc.Count != wantReasons[i].Count || rc.Example == "" {
			t.Errorf("reason %d: %+v, want %+v", i, rc, wantReasons[i])
		}
	}
	l := p.DeadLetters[0]
	if l.Engine != "engine-1" || l.Origin != "squall.events/0/7" || l.Event != nil || l.ID == "" {
		t.Errorf("letter %+v", l)
	}

	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"stage", "?stage=decode", 1},
		{"reason", "?reason=action+http", 2},
		{"error", "?error=DISK", 1},
		{"webhook", "?webhook=github", 3},
		{"since", "?since=1h", 3},
		{"until", "?until=" + old.Add(time.Minute).Format(time.RFC3339Nano), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := w.list(tc.query); p.Matched != tc.want || len(p.DeadLetters) != tc.want {
				t.Errorf("%s: matched %d (%d letters), want %d", tc.query, p.Matched, len(p.DeadLetters), tc.want)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		seen := map[string]bool{}
		cursor := ""
		for range 10 {
			p := w.list("?limit=1" + cursor)
			for _, l := range p.DeadLetters {
				if seen[l.ID] {
					t.Fatalf("%s twice", l.ID)
				}
				seen[l.ID] = true
			}
			if p.Next == "" {
				break
			}
			cursor = "&cursor=" + p.Next
		}
		if len(seen) != 4 {
			t.Errorf("%d letters over the pages, want 4", len(seen))
		}
	})

	t.Run("scan limit", func(t *testing.T) {
		w2 := newWorld(t, Config{MaxReplays: 3, ScanLimit: 2, ScanBytes: 1 << 20, Timeout: 5 * time.Second, ReplayRate: 10, ReplayBurst: 10, MaxReplayBatch: 10})
		for range 5 {
			w2.deadLetter(letter{key: "a", stage: "decode", err: "bad"})
		}
		total := 0
		cursor := ""
		for range 10 {
			p := w2.list("?limit=50" + cursor)
			if p.Scanned > 2 {
				t.Fatalf("scanned %d, limit 2", p.Scanned)
			}
			total += len(p.DeadLetters)
			if p.Next == "" {
				break
			}
			cursor = "&cursor=" + p.Next
		}
		if total != 5 {
			t.Errorf("%d letters, want 5", total)
		}
	})
}

func TestAPI_Show(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Default())
	w.deadLetter(letter{key: "a", webhook: "github", stage: "action", actions: "0:http", err: "boom"})
	id := w.list("").DeadLetters[0].ID
	var l Letter
	if code := w.do(http.MethodGet, Prefix+"/"+id, admin, nil, &l); code != http.StatusOK {
		t.Fatalf("show: %d", code)
	}
	if string(l.Event) != `{"type":"alert","n":0}` || len(l.Headers) == 0 || l.Error != "boom" || l.Webhook != "github" {
		t.Errorf("show: %+v", l)
	}
	var e struct{ Code string }
	if code := w.do(http.MethodGet, Prefix+"/"+testDLQ+"/0/999", admin, nil, &e); code != http.StatusNotFound || e.Code != "DEAD_LETTER_NOT_FOUND" {
		t.Errorf("missing: %d %s", code, e.Code)
	}
	if code := w.do(http.MethodGet, Prefix+"/other/0/0", admin, nil, &e); code != http.StatusNotFound {
		t.Errorf("other topic: %d %s", code, e.Code)
	}
}

func TestAPI_Access(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Default())
	for _, tc := range []struct {
		name, method, path, authz string
		want                      int
	}{
		{"no token", http.MethodGet, Prefix, "", http.StatusUnauthorized},
		{"view", http.MethodGet, Prefix, token("view", "edit"), http.StatusForbidden},
		{"read", http.MethodGet, Prefix, token(string(auth.DeadLettersRead)), http.StatusOK},
		{"replay implies read", http.MethodGet, Prefix, token(string(auth.DeadLettersReplay)), http.StatusOK},
		{"read cannot replay", http.MethodPost, Prefix + "/replay", token(string(auth.DeadLettersRead)), http.StatusForbidden},
		{"scoped to a tenant", http.MethodGet, Prefix, "Bearer " + auth.EncodeUnsigned(auth.Claims{User: "u", Auths: map[string]auth.Authorization{
			"t": {Path: []string{"root", "t1"}, Roles: []string{"admin"}}}}), http.StatusForbidden},
		{"unknown parameter", http.MethodGet, Prefix + "?tenant=x", admin, http.StatusBadRequest},
		{"bad limit", http.MethodGet, Prefix + "?limit=100000", admin, http.StatusBadRequest},
		{"bad since", http.MethodGet, Prefix + "?since=yesterday", admin, http.StatusBadRequest},
		{"bad stage", http.MethodGet, Prefix + "?stage=x", admin, http.StatusBadRequest},
		{"bad cursor", http.MethodGet, Prefix + "?cursor=x", admin, http.StatusBadRequest},
		{"bad id", http.MethodGet, Prefix + "/a/b/c", admin, http.StatusBadRequest},
		{"no route", http.MethodGet, Prefix + "/a/b", admin, http.StatusNotFound},
		{"replay with GET", http.MethodGet, Prefix + "/replay", admin, http.StatusMethodNotAllowed},
		{"delete", http.MethodDelete, Prefix, admin, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e struct{ Code, Message string }
			out := any(&e)
			if tc.want == http.StatusOK {
				out = nil
			}
			var body any
			if tc.method == http.MethodPost {
				body = ReplayRequest{IDs: []string{testDLQ + "/0/0"}}
			}
			if code := w.do(tc.method, tc.path, tc.authz, body, out); code != tc.want {
				t.Errorf("%d %+v, want %d", code, e, tc.want)
			}
		})
	}
	for _, body := range []string{``, `{}`, `{"ids":["x"]}`, `{"ids":["a/0/0"],"filter":{}}`, `{"ids":[],"bogus":1}`, `{"filter":{"stage":"x"}}`} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, w.srv.URL+Prefix+"/replay", strings.NewReader(body))
		req.Header.Set("Authorization", admin)
		req.Header.Set("Content-Type", "application/json")
		if resp, _ := calltest.Do(t, calltest.Client().Do, req); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %s: %d, want 400", body, resp.StatusCode)
		}
	}
}

func TestAPI_Replay(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxReplays = 2
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	w := newWorld(t, cfg)
	w.deadLetter(
		letter{key: "a", webhook: "github", stage: "action", actions: "0:http", err: "down"},
		letter{key: "b", webhook: "github", stage: "action", actions: "0:http", err: "down", count: 2},
		letter{key: "c", webhook: "nagios", stage: "decode", err: "bad"},
	)
	p := w.list("")
	ids := map[string]string{}
	for _, l := range p.DeadLetters {
		ids[l.Key] = l.ID
	}

	// Replayed once, however often asked.
	for i := range 2 {
		a := w.replay(ReplayRequest{IDs: []string{ids["a"], ids["a"]}})
		want := StatusReplayed
		if i == 1 {
			want = StatusAlreadyReplayed
		}
		if len(a.Results) != 1 || a.Results[0].Status != want {
			t.Fatalf("replay %d: %+v, want %s", i, a.Results, want)
		}
	}
	// Too often replayed: it stays dead.
	a := w.replay(ReplayRequest{IDs: []string{ids["b"], testDLQ + "/1/999", "other/0/0"}})
	if a.Replayed != 0 || a.Results[0].Status != StatusRefused || !strings.Contains(a.Results[0].Reason, "stays dead") ||
		a.Results[1].Status != StatusNotFound || a.Results[2].Status != StatusNotFound {
		t.Errorf("refused: %+v", a.Results)
	}
	// By filter: c only (a is replayed already, b is not decode).
	a = w.replay(ReplayRequest{Filter: &Filter{Stage: "decode"}})
	if a.Replayed != 1 || a.Results[0].ID != ids["c"] {
		t.Errorf("filter: %+v", a)
	}

	recs := w.broker.Records(t, testEvents)
	if len(recs) != 2 {
		t.Fatalf("%d records in %s, want 2", len(recs), testEvents)
	}
	for _, r := range recs {
		of, _ := r.Header(deadletter.HeaderReplayOf)
		n, _ := r.Header(deadletter.HeaderReplayCount)
		by, _ := r.Header(deadletter.HeaderReplayBy)
		if (of != ids["a"] && of != ids["c"]) || n != "1" || by != "ops" {
			t.Errorf("replay record: of %q count %q by %q", of, n, by)
		}
		for _, h := range r.Headers {
			if deadletter.IsReason(h.Key) {
				t.Errorf("replay record kept %s", h.Key)
			}
		}
		if _, ok := r.Header(headerWebhook); !ok {
			t.Errorf("replay record lost the event's headers: %+v", r.Headers)
		}
	}
	for status, want := range map[string]float64{StatusReplayed: 2, StatusAlreadyReplayed: 1, StatusRefused: 1, StatusNotFound: 2} {
		if got := testutil.ToFloat64(w.api.replays.WithLabelValues(status)); got != want {
			t.Errorf("squall_master_deadletter_replays_total{status=%q} = %v, want %v", status, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "squall_master_deadletter_replays_total"); err != nil || n != 4 {
		t.Errorf("%d series registered (%v), want 4", n, err)
	}
	// The list shows the replays and skips the markers.
	p = w.list("")
	if p.Matched != 3 {
		t.Errorf("matched %d after the replays (markers counted?)", p.Matched)
	}
	for _, l := range p.DeadLetters {
		if replayed := l.Replayed != nil; replayed != (l.Key != "b") {
			t.Errorf("%s: replayed %+v", l.ID, l.Replayed)
		}
	}
}

// TestAPI_ReplayBounds: replays are paced, and a dead letter whose
// replay marker cannot be looked for is not replayed.
func TestAPI_ReplayBounds(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.ReplayRate, cfg.ReplayBurst = 0.001, 1 // one, then one every 1000 s
	cfg.Timeout = 2 * time.Second
	cfg.ScanLimit = 3
	w := newWorld(t, cfg)
	for range 4 {
		w.deadLetter(letter{key: "a", stage: "decode", err: "bad"})
	}
	p := w.list("")
	if len(p.DeadLetters) != 3 || p.Complete {
		t.Fatalf("page: %d letters, complete %v; want the scan limit to stop it at 3", len(p.DeadLetters), p.Complete)
	}
	first, last := p.DeadLetters[0], p.DeadLetters[2]
	// More than the scan limit follow the first in its partition.
	a := w.replay(ReplayRequest{IDs: []string{first.ID}})
	if a.Results[0].Status != StatusRefused || !strings.Contains(a.Results[0].Reason, "scan limit") {
		t.Errorf("replay of the first: %+v", a.Results)
	}
	next := testDLQ + "/" + strings.ReplaceAll(p.Next, "-", "/")
	a = w.replay(ReplayRequest{IDs: []string{next}})
	if a.Results[0].Status != StatusReplayed {
		t.Fatalf("replay of the last: %+v", a.Results)
	}
	a = w.replay(ReplayRequest{IDs: []string{last.ID}})
	if a.Results[0].Status != StatusFailed || !strings.Contains(a.Results[0].Reason, "rate limit") {
		t.Errorf("a replay past the rate: %+v", a.Results)
	}
	if recs := w.broker.Records(t, testEvents); len(recs) != 1 {
		t.Errorf("%d replays produced, want 1", len(recs))
	}
}
