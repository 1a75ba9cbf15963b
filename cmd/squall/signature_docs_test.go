package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/internal/filetest"
)

// signaturePages are the pages of docs/webhooks, one per signature scheme.
var signaturePages = []string{"github", "standard-webhooks", "stripe", "slack", "hmac"}

// fencedBlocks returns the contents of the ```lang blocks of a markdown
// text.
func fencedBlocks(doc, lang string) []string {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```$")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestSignatureDocs runs the page of every signature scheme against a real
// satellite and Kafka broker: the page's webhook file loads, its curl
// command, signed by openssl (an implementation independent of Squall's),
// is accepted and makes exactly one event; the same command with a body
// changed after signing is refused, and, for timestamped schemes, with a
// timestamp ten minutes old too, as the page says.
func TestSignatureDocs(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, ci := os.LookupEnv("CI"); ci {
				t.Fatalf("%s is needed to run the signature docs' commands (.ci/run installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	hooks := filepath.Join(dir, "webhooks")
	if err := os.Mkdir(hooks, 0o700); err != nil {
		t.Fatal(err)
	}
	type page struct{ name, id, command, doc string }
	var pages []page
	for _, name := range signaturePages {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks", name+".md"))
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		files, cmds := fencedBlocks(doc, "json"), fencedBlocks(doc, "sh")
		if len(files) != 1 || len(cmds) != 1 {
			t.Fatalf("docs/webhooks/%s.md has %d json and %d sh blocks, want one of each", name, len(files), len(cmds))
		}
		var hook struct {
			ID        string `json:"id"`
			Signature struct {
				Scheme string `json:"scheme"`
			} `json:"signature"`
		}
		if err := json.Unmarshal([]byte(files[0]), &hook); err != nil {
			t.Fatalf("docs/webhooks/%s.md: webhook file: %v", name, err)
		}
		if hook.Signature.Scheme != name {
			t.Errorf("docs/webhooks/%s.md: the webhook file's scheme is %q", name, hook.Signature.Scheme)
		}
		filetest.Write(t, hooks, hook.ID+".json", files[0])
		pages = append(pages, page{name, hook.ID, cmds[0], doc})
	}

	broker := startBroker(t)
	addr := startSatellite(t, []string{"SQUALL_WEBHOOKS_DIR=" + hooks}, "--name", "sat1",
		"--kafka-brokers", broker.Addr, "--spool-dir", filepath.Join(dir, "spool")).Addr

	accepted := map[string]string{} // event id → webhook id
	for _, p := range pages {
		c := p.command
		if !strings.Contains(c, readmeAddr) {
			t.Fatalf("docs/webhooks/%s.md: the command does not call %s", p.name, readmeAddr)
		}
		c = strings.TrimSpace(strings.ReplaceAll(c, readmeAddr, addr))
		body, code := curlStatus(t, dir, c)
		var ack struct {
			EventID string `json:"event_id"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &ack) != nil || ack.EventID == "" {
			t.Fatalf("docs/webhooks/%s.md: %s\nanswered %d: %s", p.name, c, code, body)
		}
		accepted[ack.EventID] = p.id

		refused := func(what, c string, status int, code string) {
			t.Helper()
			body, got := curlStatus(t, dir, c)
			var e struct {
				Code string `json:"code"`
			}
			if got != status || json.Unmarshal([]byte(body), &e) != nil || e.Code != code {
				t.Errorf("docs/webhooks/%s.md, %s: answered %d %s, want %d %s", p.name, what, got, body, status, code)
			}
		}
		const send = `--data-binary "$BODY"`
		if !strings.HasSuffix(strings.TrimSpace(c), send) {
			t.Fatalf("docs/webhooks/%s.md: the command does not end with %s", p.name, send)
		}
		refused("body changed after signing", strings.Replace(c, send, `--data-binary "$BODY "`, 1), http.StatusUnauthorized, "INVALID_SIGNATURE")
		const now, old = "TS=$(date +%s)", "TS=$(( $(date +%s) - 600 ))"
		if strings.Contains(c, now) {
			if !strings.Contains(p.doc, "With `"+old+"` it is 401\n`SIGNATURE_TIMESTAMP_OUT_OF_TOLERANCE`") {
				t.Errorf("docs/webhooks/%s.md does not say what an old timestamp gets", p.name)
			}
			refused("timestamp 10 minutes old", strings.Replace(c, now, old, 1), http.StatusUnauthorized, "SIGNATURE_TIMESTAMP_OUT_OF_TOLERANCE")
		} else if p.name != "github" {
			t.Errorf("docs/webhooks/%s.md: a timestamped scheme whose command sets no %s", p.name, now)
		}
	}

	// One event per accepted call, none for the refused ones.
	got := records(t, broker.Addr, len(accepted))
	for _, r := range got {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if want, ok := accepted[h["squall-event-id"]]; !ok || h["squall-webhook"] != want {
			t.Errorf("record of webhook %s, event %s: not an accepted call", h["squall-webhook"], h["squall-event-id"])
		}
	}
}

// records reads squall.events until it has n records, then checks for a
// moment that no more come.
func records(t *testing.T, broker string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("squall.events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(recs) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		fetches := cl.PollFetches(ctx)
		cancel()
		recs = append(recs, fetches.Records()...)
	}
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	// All calls were answered before this read: a record of a refused call
	// would be in the topic already, behind the accepted ones.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if extra := cl.PollFetches(ctx).Records(); len(extra) != 0 {
		t.Fatalf("%d records more than the %d accepted calls", len(extra), n)
	}
	return recs
}
