package intake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/satellite/ratelimit"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// deliveryHooks are webhooks with the delivery settings.
func deliveryHooks(t testing.TB) directory {
	const signedWith = `"signature": {"scheme": "standard-webhooks", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, `
	const collector = `"collector_config": {"event_type": "e", "payload": {"all": "${@}"}}`
	return directory{
		"dedupe":      webhookstest.Parse(t, `{"id": "dedupe", "token": "tok-0123456789abc", "dedupe": {"header": "webhook-id", "window": "1h"}, `+collector+`}`),
		"dedupe-body": webhookstest.Parse(t, `{"id": "dedupe-body", "token": "tok-0123456789abc", "dedupe": {"jmespath": "data.id"}, `+collector+`}`),
		"limited":     webhookstest.Parse(t, `{"id": "limited", "token": "tok-0123456789abc", "rate_limit": {"rate": 0.001, "burst": 2}, `+collector+`}`),
		"per-client":  webhookstest.Parse(t, `{"id": "per-client", "token": "tok-0123456789abc", "rate_limit": {"rate": 0.001, "burst": 1, "per_client": true}, `+collector+`}`),
		"allowed":     webhookstest.Parse(t, `{"id": "allowed", "token": "tok-0123456789abc", "allow_ips": ["192.0.2.0/24"], `+collector+`}`),
		"small":       webhookstest.Parse(t, `{"id": "small", "token": "tok-0123456789abc", "max_payload_size": 16, `+collector+`}`),
		"signed":      webhookstest.Parse(t, `{"id": "signed", "token": "tok-0123456789abc", "dedupe": {"header": "webhook-id"}, `+signedWith+collector+`}`),
		"signed-svix": webhookstest.Parse(t, `{"id": "signed-svix", "token": "tok-0123456789abc", "dedupe": {"header": "svix-id"}, `+signedWith+collector+`}`),
	}
}

// deliveryServer serves an Intake with the delivery hooks, a real dedupe
// store and, when trusted is not empty, trusted proxies.
func deliveryServer(t *testing.T, front string, sink Sink, trusted ...string) (*Intake, *testServer) {
	t.Helper()
	store, err := dedupe.New(dedupe.Config{Path: filepath.Join(t.TempDir(), dedupe.FileName)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Open(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	prefixes, err := clientaddr.ParsePrefixes(trusted)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := clientaddr.New(prefixes, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	})
	// Served until before the store closes.
	return serveIntake(t, front, Config{TenantID: "site-a", Source: "sat-1", RetryAfter: 7 * time.Second,
		Clients: clients, Limits: ratelimit.New(0), Dedupe: store}, deliveryHooks(t), sink)
}

// eventID returns the event id of a 200 answer.
func eventID(t *testing.T, a answer) string {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("answer %d %s, want 200", a.status, a.raw)
	}
	var v struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(a.raw, &v); err != nil || v.EventID == "" {
		t.Fatalf("answer %s: %v", a.raw, err)
	}
	return v.EventID
}

func TestIntake_Dedupe(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		in, srv := deliveryServer(t, front, sink)
		url := srv.URL + "/engine/webhook/event/dedupe?token=tok-0123456789abc"
		id := http.Header{"Webhook-Id": {"msg_1"}}

		first := call(t, srv.Client(), "POST", url, strings.NewReader(`{"n": 1}`), id)
		ev := eventID(t, first)
		if first.header.Get(HeaderDeduplicated) != "" {
			t.Error("first delivery marked as a duplicate")
		}
		// A repeat, even with another body: the first event's id, no event.
		again := call(t, srv.Client(), "POST", url, strings.NewReader(`{"n": 2}`), id)
		if got := eventID(t, again); got != ev {
			t.Errorf("repeat answered %s, want %s", got, ev)
		}
		if again.header.Get(HeaderDeduplicated) != "true" || again.header.Get("Squall-Event-Id") != ev {
			t.Errorf("repeat headers: %v", again.header)
		}
		other := call(t, srv.Client(), "POST", url, strings.NewReader(`{"n": 3}`), http.Header{"Webhook-Id": {"msg_2"}})
		if eventID(t, other) == ev {
			t.Error("another delivery id got the same event")
		}
		// Without the id, or a too long one: 400, nothing forwarded.
		missing := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil)
		if missing.status != http.StatusBadRequest || missing.body.Code != CodeNoDeliveryID || missing.body.Params["header"] != "Webhook-Id" {
			t.Errorf("no delivery id: %d %s", missing.status, missing.raw)
		}
		long := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), http.Header{"Webhook-Id": {strings.Repeat("x", 300)}})
		if long.status != http.StatusBadRequest || long.body.Code != CodeBadDeliveryID {
			t.Errorf("long delivery id: %d %s", long.status, long.raw)
		}

		// The id taken from the body.
		bodyURL := srv.URL + "/engine/webhook/event/dedupe-body?token=tok-0123456789abc"
		ev2 := eventID(t, call(t, srv.Client(), "POST", bodyURL, strings.NewReader(`{"data": {"id": "evt_1", "v": 1}}`), nil))
		if got := eventID(t, call(t, srv.Client(), "POST", bodyURL, strings.NewReader(`{"data": {"id": "evt_1", "v": 2}}`), nil)); got != ev2 {
			t.Errorf("body id repeat answered %s, want %s", got, ev2)
		}
		if a := call(t, srv.Client(), "POST", bodyURL, strings.NewReader(`{"data": {}}`), nil); a.body.Code != CodeNoDeliveryID {
			t.Errorf("body without id: %d %s", a.status, a.raw)
		}
		if a := call(t, srv.Client(), "POST", bodyURL, strings.NewReader(`{"data"`), nil); a.body.Code != CodeBodyNotJSON {
			t.Errorf("body not JSON: %d %s", a.status, a.raw)
		}

		if n := len(sink.records); n != 3 {
			t.Errorf("%d events, want 3", n)
		}
		for _, c := range []struct {
			metric prometheus.Collector
			want   float64
		}{
			{in.m.accepted.WithLabelValues("dedupe"), 2},
			{in.m.deduplicated.WithLabelValues("dedupe"), 1},
			{in.m.deduplicated.WithLabelValues("dedupe-body"), 1},
			{in.m.refused.WithLabelValues("dedupe", ReasonDuplicate), 1},
			{in.m.refused.WithLabelValues("dedupe", ReasonDeliveryID), 2},
		} {
			if got := testutil.ToFloat64(c.metric); got != c.want {
				t.Errorf("%v = %g, want %g", c.metric, got, c.want)
			}
		}
	})
}

// svixNames renames the Standard Webhooks headers of h to their svix-*
// names, as a replay that moves a captured delivery to the other family.
func svixNames(h http.Header) http.Header {
	return http.Header{
		"Svix-Id":        h["Webhook-Id"],
		"Svix-Timestamp": h["Webhook-Timestamp"],
		"Svix-Signature": h["Webhook-Signature"],
	}
}

// TestIntake_DedupeSignedID replays one signed delivery under the other
// header family, with a fresh id in the header the signature does not
// cover: dedupe keys on the id the signature verified, so no replay makes
// a second event, and a call whose two id headers differ is refused.
func TestIntake_DedupeSignedID(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		in, srv := deliveryServer(t, front, sink)
		body := []byte(`{"n": 1}`)
		for _, tc := range []struct{ id, family string }{{"signed", "webhook"}, {"signed-svix", "svix"}} {
			url := srv.URL + "/engine/webhook/event/" + tc.id + "?token=tok-0123456789abc"
			sig := in.dir.Lookup(tc.id).Signature
			signed := sig.Sign(body, time.Now(), "msg_"+tc.id)
			if tc.family == "svix" {
				signed = svixNames(signed)
			}
			ev := eventID(t, call(t, srv.Client(), "POST", url, bytes.NewReader(body), signed))

			// The same delivery under the other family's names.
			moved := sig.Sign(body, time.Now(), "msg_"+tc.id)
			if tc.family == "webhook" {
				moved = svixNames(moved)
			}
			a := call(t, srv.Client(), "POST", url, bytes.NewReader(body), moved)
			if got := eventID(t, a); got != ev || a.header.Get(HeaderDeduplicated) != "true" {
				t.Errorf("%s: the delivery under the other names answered %s (deduplicated %q), want %s",
					tc.id, got, a.header.Get(HeaderDeduplicated), ev)
			}

			// The signed headers of one family and a fresh, unsigned id
			// under the other: refused, whichever the dedupe header.
			for _, fresh := range []string{"Webhook-Id", "Svix-Id"} {
				h := moved.Clone()
				if h.Get(fresh) != "" {
					continue
				}
				h.Set(fresh, "fresh-"+fresh)
				a := call(t, srv.Client(), "POST", url, bytes.NewReader(body), h)
				if a.status != http.StatusBadRequest || a.body.Code != CodeBadSignatureHeader {
					t.Errorf("%s: signed headers plus a fresh %s: %d %s, want 400 %s", tc.id, fresh, a.status, a.raw, CodeBadSignatureHeader)
				}
			}
		}
		if n := len(sink.records); n != 2 {
			t.Errorf("%d events, want 2 (one per webhook)", n)
		}
	})
}

func TestIntake_DedupeFailureNotRemembered(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{err: fmt.Errorf("x: %w", ErrSpoolFull)}
		_, srv := deliveryServer(t, front, sink)
		url := srv.URL + "/engine/webhook/event/dedupe?token=tok-0123456789abc"
		id := http.Header{"Webhook-Id": {"retry-me"}}
		if a := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), id); a.status != http.StatusServiceUnavailable {
			t.Fatalf("spool full: %d %s", a.status, a.raw)
		}
		// A refused body (no event) does not poison the id either.
		if a := call(t, srv.Client(), "POST", url, strings.NewReader(`{`), id); a.status != http.StatusBadRequest {
			t.Fatalf("not JSON: %d %s", a.status, a.raw)
		}
		sink.mu.Lock()
		sink.err = nil
		sink.mu.Unlock()
		a := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), id)
		eventID(t, a)
		if a.header.Get(HeaderDeduplicated) != "" || len(sink.records) != 1 {
			t.Errorf("the retry after a failure was deduplicated: %v, %d events", a.header, len(sink.records))
		}
	})
}

func TestIntake_DedupeConcurrent(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 16)}
		_, srv := deliveryServer(t, front, sink)
		url := srv.URL + "/engine/webhook/event/dedupe?token=tok-0123456789abc"
		const calls = 8
		ids := make(chan string, calls)
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
				req.Header.Set("Webhook-Id", "same")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var v struct {
					EventID string `json:"event_id"`
				}
				json.NewDecoder(resp.Body).Decode(&v)
				ids <- v.EventID
			})
		}
		<-sink.entered // one call holds the id, blocked in Publish
		close(sink.block)
		wg.Wait()
		close(ids)
		var first string
		for id := range ids {
			if first == "" {
				first = id
			}
			if id == "" || id != first {
				t.Errorf("answers differ: %q and %q", first, id)
			}
		}
		if n := len(sink.records); n != 1 {
			t.Errorf("%d events for one delivery id, want 1", n)
		}
	})
}

func TestIntake_RateLimit(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		sink := &recorder{}
		in, srv := deliveryServer(t, front, sink, "127.0.0.0/8")
		url := srv.URL + "/engine/webhook/event/limited?token=tok-0123456789abc"
		for range 2 {
			eventID(t, call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil))
		}
		a := call(t, srv.Client(), "POST", url, strings.NewReader(`{}`), nil)
		if a.status != http.StatusTooManyRequests || a.body.Code != CodeRateLimited || a.body.Params["burst"] != float64(2) {
			t.Fatalf("third call: %d %s", a.status, a.raw)
		}
		if ra := a.header.Get("Retry-After"); ra != "1000" {
			t.Errorf("Retry-After %q, want 1000 (0.001 calls per second)", ra)
		}
		// A wrong token is refused as such, and takes nothing from the bucket.
		if a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/limited?token=no", strings.NewReader(`{}`), nil); a.status != http.StatusUnauthorized {
			t.Errorf("wrong token: %d", a.status)
		}

		// The limit refuses before the body is read: a body that never comes
		// does not hold the answer back. (fasthttp waits for its first
		// byte before it calls the handler.)
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("{"))
		req, _ := http.NewRequest("POST", url, pr)
		req.ContentLength = 1 << 20
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("unsent body: %d", resp.StatusCode)
		}

		// Per client: each address (behind the trusted proxy) has its bucket.
		pc := srv.URL + "/engine/webhook/event/per-client?token=tok-0123456789abc"
		for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
			h := http.Header{"X-Forwarded-For": {client}}
			eventID(t, call(t, srv.Client(), "POST", pc, strings.NewReader(`{}`), h))
			if a := call(t, srv.Client(), "POST", pc, strings.NewReader(`{}`), h); a.status != http.StatusTooManyRequests {
				t.Errorf("%s second call: %d", client, a.status)
			}
		}
		if n := len(sink.records); n != 4 {
			t.Errorf("%d events, want 4", n)
		}
		if got := testutil.ToFloat64(in.m.refused.WithLabelValues("limited", ReasonRate)); got != 2 {
			t.Errorf("refused{rate} = %g, want 2", got)
		}
		if got := testutil.ToFloat64(in.m.refused.WithLabelValues("per-client", ReasonRate)); got != 2 {
			t.Errorf("refused{per-client, rate} = %g, want 2", got)
		}
	})
}

func TestIntake_AllowIPs(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		url := "/engine/webhook/event/allowed?token=tok-0123456789abc"
		t.Run("no trusted proxy", func(t *testing.T) {
			t.Parallel()
			in, srv := deliveryServer(t, front, &recorder{})
			// The peer is 127.0.0.1; its X-Forwarded-For is not believed.
			a := call(t, srv.Client(), "POST", srv.URL+url, strings.NewReader(`{}`), http.Header{"X-Forwarded-For": {"192.0.2.1"}})
			if a.status != http.StatusForbidden || a.body.Code != CodeAddressNotAllowed || a.body.Params["address"] != "127.0.0.1" {
				t.Errorf("got %d %s", a.status, a.raw)
			}
			// Refused before the token is looked at.
			if a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/allowed?token=no", strings.NewReader(`{}`), nil); a.status != http.StatusForbidden {
				t.Errorf("wrong token from a refused address: %d", a.status)
			}
			if got := testutil.ToFloat64(in.m.refused.WithLabelValues("allowed", ReasonAddress)); got != 2 {
				t.Errorf("refused{address} = %g, want 2", got)
			}
		})
		t.Run("trusted proxy", func(t *testing.T) {
			t.Parallel()
			sink := &recorder{}
			_, srv := deliveryServer(t, front, sink, "127.0.0.1")
			for _, tc := range []struct {
				xff    string
				status int
			}{
				{"192.0.2.9", http.StatusOK},
				{"192.0.2.9, 198.51.100.1", http.StatusForbidden}, // the proxy's peer is the rightmost
				{"198.51.100.1, 192.0.2.9", http.StatusOK},
				{"", http.StatusForbidden}, // the proxy itself
			} {
				h := http.Header{}
				if tc.xff != "" {
					h.Set("X-Forwarded-For", tc.xff)
				}
				if a := call(t, srv.Client(), "POST", srv.URL+url, strings.NewReader(`{}`), h); a.status != tc.status {
					t.Errorf("X-Forwarded-For %q: %d %s, want %d", tc.xff, a.status, a.raw, tc.status)
				}
			}
			if n := len(sink.records); n != 2 {
				t.Errorf("%d events, want 2", n)
			}
		})
	})
}

func TestIntake_RefusedSize(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		in, srv := deliveryServer(t, front, &recorder{})
		a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/small?token=tok-0123456789abc", strings.NewReader(`{"x": "a long body"}`), nil)
		if a.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("got %d", a.status)
		}
		if got := testutil.ToFloat64(in.m.refused.WithLabelValues("small", ReasonSize)); got != 1 {
			t.Errorf("refused{size} = %g, want 1", got)
		}
	})
}

func TestIntake_DedupeWithoutStore(t *testing.T) {
	t.Parallel()
	forFronts(t, func(t *testing.T, front string) {
		in, err := New(Config{Source: "s"}, deliveryHooks(t), &recorder{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := serveFront(t, front, in, in, ServerConfig{})
		a := call(t, srv.Client(), "POST", srv.URL+"/engine/webhook/event/dedupe?token=tok-0123456789abc", strings.NewReader(`{}`), http.Header{"Webhook-Id": {"x"}})
		if a.status != http.StatusInternalServerError {
			t.Errorf("got %d %s", a.status, a.raw)
		}
	})
}
