package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/engine/kafkasource"
)

// TestConsole_Backtest runs a backtest from the Draft tab in a real
// headless chromium against a real squall dev (whose engine runs it):
// the range, the progress, then the per-rule table, whose counts under
// the active tree and the draft are those computed here from the events
// sent, with the two changed rules marked, and the differing events.
func TestConsole_Backtest(t *testing.T) {
	t.Parallel()
	b := newBrowser(t, 90*time.Second)
	d := startDev(t, t.TempDir())
	base := "http://" + d.addr
	banner, err := os.ReadFile(d.out)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`http://\S+/ui/#token=(\S+)`).FindStringSubmatch(string(banner))
	if m == nil {
		t.Fatalf("no console link in the banner:\n%s", banner)
	}
	link, token := m[0], m[1]
	apitest.DeployTree(t, base, token, btTreeJSON(btActive, "http://127.0.0.1:1/unused"))
	if _, code, body := apitest.ImportTree(t, base, token, "root", btTreeJSON(btDraft, "http://127.0.0.1:1/unused")); code != 200 {
		t.Fatalf("import the draft: %d %s", code, body)
	}
	// The events, straight into squall dev's broker.
	const n = 200
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{logField(t, d.p.Logs.String(), "squall dev started", "kafka")}, Timeout: 5 * time.Second},
		Topic: "squall.events"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []kafkasource.Record
	for i := range n {
		recs = append(recs, kafkasource.Record{Value: fmt.Appendf(nil, `{"type": "bt", "created_ms": %d, "payload": {"id": "bt-%d", "kind": %q}}`, time.Now().UnixMilli(), i, btKind(i))})
	}
	if err := w.Write(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{}
	for i := range n {
		for r := range 3 {
			v := want[fmt.Sprintf("root/all/r%d", r+1)]
			if btActive[r] == btKind(i) {
				v[0]++
			}
			if btDraft[r] == btKind(i) {
				v[1]++
			}
			want[fmt.Sprintf("root/all/r%d", r+1)] = v
		}
	}

	b.do("sign in", chromedp.Navigate(link), until(`document.getElementById('who-user').textContent === 'admin'`))
	b.do("the Draft tab offers a backtest",
		chromedp.Click(chromedp.CSS(`#tab-draft`)),
		until(`!document.getElementById('draft-backtest-out').hidden && document.getElementById('backtest-form') !== null`),
	)
	b.do("a bad range is refused in the form",
		setValue(`#backtest-form input[name="duration"]`, "an hour"),
		chromedp.Click(chromedp.CSS(`#backtest-run`)),
		until(`document.getElementById('backtest-error').textContent.includes('duration')`),
	)
	b.do("run it over the last 1,000 events of each partition",
		setValue(`#backtest-range`, "last"),
		setValue(`#backtest-form input[name="last"]`, "1000"),
		chromedp.Click(chromedp.CSS(`#backtest-run`)),
		until(`document.getElementById('backtest-progress-text').textContent.startsWith('Backtest ')`),
		until(`document.querySelector('#backtest-summary[data-state="succeeded"]') !== null`),
	)
	b.shot("backtest")
	for rule, w := range want {
		got := eval[string](b, fmt.Sprintf(`(() => { const r = document.querySelector('#backtest-rules tr[data-rule="%s"]');
			return r ? r.querySelector('[data-side="active"]').textContent + '/' + r.querySelector('[data-side="draft"]').textContent + '/' + (r.dataset.differs || '') : 'none'; })()`, rule))
		differs := ""
		if w[0] != w[1] {
			differs = "true"
		}
		if wantRow := fmt.Sprintf("%d/%d/%s", w[0], w[1], differs); got != wantRow {
			t.Errorf("%s: %s, want %s", rule, got, wantRow)
		}
	}
	if got := eval[int](b, `document.querySelectorAll('#backtest-result .backtest-sample').length`); got != 20 {
		t.Errorf("%d differing events shown, want 20", got)
	}
	if text := eval[string](b, `document.getElementById('backtest-result').textContent`); !strings.Contains(text, "120 with a different outcome; 2 rules whose counts differ") {
		t.Errorf("summary: %s", text)
	}
	// The tab shown again follows the last backtest of the draft.
	b.do("the last backtest again after a reload",
		chromedp.Reload(),
		until(`document.querySelector('#backtest-summary[data-state="succeeded"]') !== null`),
	)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %q", errs)
	}
}
