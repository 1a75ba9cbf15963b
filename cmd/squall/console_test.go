package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/dev"
	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/node"
)

// chromiumPath returns Debian's chromium. CI installs it (.ci/run):
// there, a missing chromium fails the test; elsewhere it skips it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is required in CI (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// browser is a headless chromium tab that records the page's script
// errors and security (CSP) reports, and saves screenshots.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string // screenshots
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, timeout time.Duration) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	ctx, cancelTimeout := context.WithTimeout(t.Context(), timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelTimeout() })
	dir := os.Getenv("SQUALL_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	b := &browser{t: t, ctx: bctx, dir: dir}
	// Start the browser, then listen to the tab's errors.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(bctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *log.EventEntryAdded:
			if ev.Entry.Source == log.EntrySourceSecurity || ev.Entry.Source == log.EntrySourceJavascript {
				msg = string(ev.Entry.Source) + ": " + ev.Entry.Text
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errs = append(b.errs, msg)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, log.Enable, struct{}{}); err != nil {
		t.Fatal(err)
	}
	// The console asks before it deletes or replaces: accept, as a user
	// who means it would.
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return b
}

// pageErrors returns the errors recorded so far and forgets them.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.errs
	b.errs = nil
	return e
}

// do runs the steps of one part of the scenario; on failure it saves a
// screenshot of the page and stops the test.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v (page errors: %q; screenshots in %s)", what, err, b.pageErrors(), b.dir)
	}
}

// switchUser signs out, signs in again with token and waits until the
// page names user.
func (b *browser) switchUser(token, user string) {
	b.t.Helper()
	b.do("sign in as "+user,
		chromedp.Click(chromedp.CSS(`#sign-out`)),
		chromedp.WaitVisible(chromedp.CSS(`#signin-token`)),
		setValue(`#signin-token`, token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type="submit"]`)),
		until(`document.getElementById('who-user').textContent === '`+user+`'`),
	)
}

// shot saves a screenshot of the viewport as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Error(err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits until the expression is true in the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingMutation())
}

// untilReloaded is until for views that change without the page knowing
// (the fleet): it clicks the fleet's Reload button before every check.
func untilReloaded(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(document.getElementById('fleet-reload').click(), `+expr+`)`,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(300*time.Millisecond))
}

// logField returns the value of key in the first JSON log line whose msg
// is msg.
func logField(t *testing.T, logs, msg, key string) string {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			if v, ok := rec[key].(string); ok {
				return v
			}
		}
	}
	t.Fatalf("no %q with %s in the log:\n%s", msg, key, logs)
	return ""
}

// setValue sets the value of the element the CSS selector names, as
// typing would: with input and change events.
func setValue(selector, value string) chromedp.Action[chromedp.Void] {
	sel, _ := json.Marshal(selector)
	val, _ := json.Marshal(value)
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const e = document.querySelector(%s);
		e.value = %s;
		e.dispatchEvent(new Event('input', {bubbles: true}));
		e.dispatchEvent(new Event('change', {bubbles: true}));
	})()`, sel, val))
}

// TestConsole_Browser walks the console in a real headless chromium
// against a real squall dev: sign in through the banner's link, browse and
// search the tree, open places by their addresses (reload, back, forward,
// typed), edit a rule in its form with the server's validation errors at
// the fields (operator, accessor, regex, action id) and in JSON, fix it,
// read the diff's summary and its groups by node, deploy, run a test event
// and read the highlighted result, page and triage findings (the pager off
// when nothing matches), see the fleet; in a narrow window too. The page
// must raise no script error and no CSP report along the way.
func TestConsole_Browser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t, 150*time.Second)
	dir := t.TempDir()
	// Members stale 2 s after their last heartbeat, so that the test sees
	// one go stale.
	d := startDev(t, dir, "--fleet-stale-after", "2s")
	base := "http://" + d.addr

	// The banner's link signs in with the admin token.
	banner, err := os.ReadFile(d.out)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`http://\S+/ui/#token=(\S+)`).FindStringSubmatch(string(banner))
	if m == nil || !strings.HasPrefix(m[0], base+"/ui/#token=") {
		t.Fatalf("the banner has no console link for %s:\n%s", base, banner)
	}
	link, token := m[0], m[1]

	// Findings to page through: 30 of tenant master (the admin token's).
	for i := range 30 {
		body := fmt.Sprintf(`{"monitored_domain_id": %d, "tool_code": "leakmon", "resource_url": "https://login.example.com/", "username": "user%02d@example.com", "password": "pw%d"}`, 1+i%3, i, i)
		if code, resp := apitest.Call(t.Context(), http.MethodPut, base+"/intel/api/sdk/v0/findings/credentials", token, strings.NewReader(body), "application/json"); code != http.StatusCreated {
			t.Fatalf("insert finding: %d %s", code, resp)
		}
	}

	b.do("sign in through the link",
		chromedp.Navigate(link),
		until(`document.getElementById('who-user').textContent === 'admin'`),
	)
	b.do("the tree's address", until(`location.hash === '#/tree'`))
	if h := eval[string](b, `location.hash`); strings.Contains(h, "token") {
		t.Errorf("the fragment is still in the address (%d bytes; not shown: it holds the token)", len(h))
	}
	if got := eval[string](b, `sessionStorage.getItem('squall.token')`); got != token {
		t.Errorf("session storage holds %q, want the link's token", got)
	}
	if n := eval[int](b, `history.length`); n != 3 { // about:blank, the console without the fragment, #/tree
		t.Logf("history length %d", n)
	}

	const ruleKey = `root,master,disks/archive_disk_alerts`
	b.do("browse the tree",
		until(`document.querySelector('#tree button[data-key="`+ruleKey+`"]') !== null`),
		chromedp.Click(chromedp.CSS(`#tree button[data-key="`+ruleKey+`"]`)),
		until(`document.getElementById('tree-details').textContent.includes('used_percent')`),
		chromedp.SendKeys(chromedp.CSS(`#tree-search`), "disk"),
		until(`document.querySelectorAll('#tree .match').length === 2`), // the ruleset and the rule
	)
	b.shot("tree")
	b.do("search for nothing",
		setValue(`#tree-search`, "nothing_is_called_this"),
		chromedp.SendKeys(chromedp.CSS(`#tree-search`), "x"),
		until(`document.getElementById('tree').textContent.includes('Nothing is named like')`),
		setValue(`#tree-search`, ""),
	)

	// Addresses: the rule selected is in the address; a reload keeps it,
	// back and forward move between places, and an address typed in
	// opens its place.
	const ruleAddr = `#/tree/root/master/disks/archive_disk_alerts`
	selectedRule := `document.querySelector('#tree button[data-key="` + ruleKey + `"][aria-current="true"]') !== null && document.getElementById('tree-details').textContent.includes('used_percent')`
	b.do("the rule's address",
		until(`location.hash === '`+ruleAddr+`'`),
		chromedp.Reload(),
		until(selectedRule),
		// squall dev's example tree is put in place without a deploy:
		// no version yet, the raft index of the active tree.
		until(`/^Active tree: deployed at raft index \d+\.$/.test(document.getElementById('tree-info').textContent)`),
		chromedp.Click(chromedp.CSS(`#tab-events`)),
		until(`location.hash === '#/events' && !document.getElementById('view-events').hidden`),
		chromedp.Evaluate[chromedp.Void](`history.back()`),
		until(`location.hash === '`+ruleAddr+`' && !document.getElementById('view-tree').hidden`),
		until(selectedRule),
		chromedp.Evaluate[chromedp.Void](`history.forward()`),
		until(`location.hash === '#/events' && !document.getElementById('view-events').hidden`),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/tree/root/master'`),
		until(`document.querySelector('#tree button[data-key="root,master"][aria-current="true"]') !== null && document.querySelector('#tree-details h2').textContent === 'master'`),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/tree/root/master/nothing_here'`),
		until(`document.getElementById('tree-details').textContent.includes('Nothing is at root › master › nothing_here')`),
		chromedp.Evaluate[chromedp.Void](`location.hash = '`+ruleAddr+`'`),
		until(selectedRule),
	)
	// squall dev offers the test event of its example tree (a master
	// does not: its page is not marked, TestNew_Dev in master/console).
	if got := eval[string](b, `document.getElementById('event-example').options[0].textContent`); !strings.Contains(got, "squall dev example") {
		t.Errorf("the first example in squall dev is %q, want the dev example", got)
	}
	if eval[bool](b, `document.getElementById('status').getBoundingClientRect().height > 0`) {
		t.Error("the empty status line takes room")
	}

	// Keyboard: the arrow keys move between tabs.
	b.do("tabs by keyboard",
		chromedp.Focus(chromedp.CSS(`#tab-tree`)),
		chromedp.KeyEvent(kb.ArrowRight),
		until(`document.getElementById('tab-draft').getAttribute('aria-selected') === 'true' && document.activeElement.id === 'tab-draft' && location.hash === '#/draft'`),
	)

	// The rule's form: the condition's operators and arguments, the
	// variables and the actions have their own inputs; the server's
	// validation errors (params.FIELD) show at the input at fault.
	const first = `[data-path="constraint.WHERE.first"]`
	b.do("create a draft and edit a rule with an error",
		until(`document.getElementById('draft-info').textContent.includes('There is no draft')`),
		chromedp.Click(chromedp.CSS(`#draft-create`)),
		until(`document.querySelector('#draft-tree button[data-key="`+ruleKey+`"]') !== null`),
		chromedp.Click(chromedp.CSS(`#draft-tree button[data-key="`+ruleKey+`"]`)),
		until(`location.hash === '#/draft/root/master/disks/archive_disk_alerts'`),
		chromedp.WaitVisible(chromedp.CSS(first)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(first)),
		until(`document.querySelector('#draft-editor h2').textContent === 'Rule archive_disk_alerts' && document.querySelector('`+first+`').value === '${event.type}'`),
		setValue(first, `${event.type`),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.getElementById('edit-constraint-WHERE-first-error').textContent.includes('unterminated accessor')`),
	)
	if !eval[bool](b, `document.querySelector('.field[data-field-path="constraint.WHERE.first"]').classList.contains('invalid') && document.activeElement.dataset.path === 'constraint.WHERE.first'`) {
		t.Error("the validation error does not mark and focus the condition's first argument")
	}
	b.shot("draft-validation-error")
	b.do("errors at the regex, the operator and an action",
		setValue(first, `${event.type}`),
		// An AND of the comparison and a regex whose pattern does not
		// compile: the error is at the regex.
		setValue(`[data-path="constraint.WHERE.type"]`, "AND"),
		until(`document.querySelector('[data-path="constraint.WHERE.operators[0].type"]') !== null`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Add condition').click()`),
		setValue(`[data-path="constraint.WHERE.operators[1].type"]`, "regex"),
		setValue(`[data-path="constraint.WHERE.operators[1].regex"]`, "(unclosed"),
		setValue(`[data-path="constraint.WHERE.operators[1].target"]`, "${event.payload.message}"),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.getElementById('edit-constraint-WHERE-operators-1-regex-error').textContent.includes('regex')`),
		setValue(`[data-path="constraint.WHERE.operators[1].regex"]`, "(full)"),
		setValue(`[data-path="actions[0].id"]`, "archive-2"),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.getElementById('edit-actions-0-id-error').textContent.includes('archive-2')`),
		until(`document.getElementById('edit-constraint-WHERE-operators-1-regex-error').textContent === ''`),
		setValue(`[data-path="actions[0].id"]`, "archive"),
		// The JSON view is one click away, with what was typed.
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Edit as JSON').click()`),
		until(`document.getElementById('edit-where') !== null && JSON.parse(document.getElementById('edit-where').value).operators[1].regex === '(full)'`),
		setValue(`#edit-where`, `{"type": "sameAs", "first": "${event.type}", "second": "disk_alert"}`),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.getElementById('edit-where-error').textContent.includes('unknown operator')`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Edit in the form').click()`),
		until(`document.querySelector('[data-path="constraint.WHERE.type"]') !== null`),
	)
	b.do("fix the rule",
		setValue(`[data-path="constraint.WHERE.type"]`, "equals"),
		setValue(first, `${event.type}`),
		setValue(`[data-path="constraint.WHERE.second"]`, `disk_alert`),
		setValue(`#edit-description`, "Edited in the console"),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.getElementById('status').textContent.includes('Rule archive_disk_alerts saved')`),
		until(`document.getElementById('edit-constraint-WHERE-first-error').textContent === ''`),
	)
	b.do("add a rule and delete it",
		chromedp.Click(chromedp.CSS(`#draft-tree button[data-key="root,master,disks"]`)),
		until(`[...document.querySelectorAll('#draft-editor button')].some(e => e.textContent === 'Add rule')`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Add rule').click()`),
		until(`document.querySelector('#draft-editor h2').textContent === 'New rule in disks'`),
		setValue(`#edit-name`, "console_rule"),
		// An action no executor handles: saved, and the answer's
		// X-Squall-Warnings are listed under the status line.
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Add action').click()`),
		setValue(`[data-path="actions[0].id"]`, "smtp"),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.querySelector('#draft-tree button[data-key="root,master,disks/console_rule"][aria-current="true"]') !== null`),
		until(`document.querySelector('#draft-editor h2').textContent === 'Rule console_rule'`),
		until(`!document.getElementById('warnings').hidden && document.getElementById('warnings').textContent.includes('action "smtp" in ruleset root.master.disks, rule console_rule has no executor')`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Delete').click()`),
		until(`document.querySelector('#draft-tree button[data-key="root,master,disks/console_rule"]') === null && document.getElementById('status').textContent === 'Deleted rule console_rule.'`),
		until(`document.getElementById('warnings').hidden`),
		// A new ruleset, for the diff to count a node added.
		chromedp.Click(chromedp.CSS(`#draft-tree button[data-key="root,master"]`)),
		until(`[...document.querySelectorAll('#draft-editor button')].some(e => e.textContent === 'Add ruleset')`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#draft-editor button')].find(e => e.textContent === 'Add ruleset').click()`),
		until(`document.querySelector('#draft-editor h2').textContent === 'New ruleset in master'`),
		setValue(`#edit-name`, "console_set"),
		chromedp.Click(chromedp.CSS(`#draft-editor button[type="submit"]`)),
		until(`document.querySelector('#draft-tree button[data-key="root,master,console_set"][aria-current="true"]') !== null`),
		until(`location.hash === '#/draft/root/master/console_set'`),
		chromedp.Click(chromedp.CSS(`#draft-tree button[data-key="root,master,disks"]`)),
		until(`location.hash === '#/draft/root/master/disks'`),
		chromedp.Click(chromedp.CSS(`#draft-diff`)),
		until(`[...document.querySelectorAll('#draft-diff-out .add')].some(e => e.textContent.includes('Edited in the console'))`),
	)
	// The diff: a summary, then the changes by node, the JSON one click
	// away; its address keeps it open.
	if got := eval[string](b, `[...document.querySelectorAll('#draft-diff-out td[data-count]')].map(e => e.dataset.count + '=' + e.textContent).join(' ')`); got != "nodes-added=1 nodes-removed=0 nodes-changed=0 rules-added=0 rules-removed=0 rules-changed=1" {
		t.Errorf("diff summary %q", got)
	}
	if got := eval[string](b, `[...document.querySelectorAll('#draft-diff-out details.diff-group')].map(e => e.dataset.node + ':' + e.dataset.change + ':' + [...e.querySelectorAll('details.diff-rule')].map(r => r.dataset.rule + '/' + r.dataset.change).join(',')).join(' ')`); got != "root,master,disks:changed:archive_disk_alerts/changed root,master,console_set:added:" {
		t.Errorf("diff groups %q", got)
	}
	if !eval[bool](b, `document.querySelector('#draft-diff-out details.diff-raw') !== null && !document.querySelector('#draft-diff-out details.diff-raw').open`) {
		t.Error("the raw JSON diff is not one click away (closed)")
	}
	b.shot("draft-diff")
	b.do("the diff's address",
		until(`location.hash === '#/draft/root/master/disks?diff=1'`),
		chromedp.Reload(),
		until(`!document.getElementById('draft-diff-out').hidden && document.querySelector('#draft-diff-out td[data-count="rules-changed"]')?.textContent === '1'`),
		until(`document.querySelector('#draft-editor h2').textContent === 'Ruleset disks'`),
	)
	b.do("the draft in the tree tab, by its address",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/tree/root/master/console_set?source=draft'`),
		until(`document.getElementById('tree-source').value === 'draft' && document.querySelector('#tree button[data-key="root,master,console_set"][aria-current="true"]') !== null`),
		setValue(`#tree-source`, "active"),
		until(`location.hash === '#/tree' && document.querySelector('#tree button[data-key="root,master,disks"]') !== null && document.querySelector('#tree button[data-key="root,master,console_set"]') === null`),
		chromedp.Evaluate[chromedp.Void](`history.back()`),
		until(`document.getElementById('tree-source').value === 'draft' && document.querySelector('#tree button[data-key="root,master,console_set"][aria-current="true"]') !== null`),
		// The tab returns to the draft's place. It shows the diff again,
		// and its summary in the status line, which moves the page down:
		// the next click waits for it.
		chromedp.Click(chromedp.CSS(`#tab-draft`)),
		until(`location.hash === '#/draft/root/master/disks?diff=1' && !document.getElementById('draft-diff-out').hidden`),
		until(`document.getElementById('status').textContent.startsWith('Against the active tree')`),
	)
	b.do("deploy after the confirmation",
		chromedp.Click(chromedp.CSS(`#draft-deploy`)),
		until(`document.getElementById('deploy-dialog').open && document.getElementById('deploy-diff').textContent.includes('Edited in the console')`),
		until(`document.querySelector('#deploy-diff .diff-text').textContent === 'Against the active tree: 1 node added; 1 rule changed.'`),
	)
	b.shot("deploy-confirmation")
	b.do("deploy",
		chromedp.Click(chromedp.CSS(`#deploy-confirm`)),
		until(`document.getElementById('status').textContent.includes('Deployed')`),
	)
	code, active := apitest.Call(t.Context(), http.MethodGet, base+"/api/v2_beta/config/active/rule/details/all/root,master,disks/archive_disk_alerts", token, nil, "")
	if code != http.StatusOK || !strings.Contains(string(active), "Edited in the console") {
		t.Fatalf("the active rule after the deploy: %d %s", code, active)
	}

	b.do("run a test event",
		chromedp.Click(chromedp.CSS(`#tab-events`)),
		chromedp.WaitVisible(chromedp.CSS(`#event-body`)),
		until(`!document.getElementById('event-full').disabled`), // admin may run Full
		chromedp.Click(chromedp.CSS(`#event-form button[type="submit"]`)),
		until(`document.querySelector('#event-result li[data-rule="archive_disk_alerts"][data-status="Matched"]') !== null`),
	)
	if got := eval[string](b, `document.querySelector('#event-result li[data-rule="archive_disk_alerts"]').textContent`); !strings.Contains(got, `"used_percent": 95`) {
		t.Errorf("the matched rule does not show its extracted variable: %q", got)
	}
	if got := eval[string](b, `document.querySelector('#event-result li[data-node="master"] .badge').textContent`); got != "Matched" {
		t.Errorf("filter master's badge is %q, want Matched", got)
	}
	b.shot("test-event")
	// Explain: the same event explained, each condition with the value it
	// read, the extraction with its input and what it took.
	const explained = `#event-result .explain li[data-kind="rule"][data-rule="archive_disk_alerts"]`
	b.do("explain a test event",
		chromedp.Click(chromedp.CSS(`#event-explain`)),
		chromedp.Click(chromedp.CSS(`#event-form button[type="submit"]`)),
		until(`document.querySelector('`+explained+`[data-status="Matched"]') !== null`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#event-result .explain').scrollIntoView()`),
	)
	for sel, want := range map[string]string{
		explained + ` .reason`:                                                           "the WHERE condition is true; 1 variable extracted; 1 action resolved",
		explained + ` .cond[data-op="equals"]`:                                           `${event.type} = "disk_alert" equals "disk_alert" → true`,
		explained + ` .variable[data-variable="used_percent"]`:                           `used_percent: from ${event.payload.message} = "Disk 95% full on /var", Regex /([0-9]+)%/ matched → 95`,
		`#event-result .explain li[data-kind="filter"][data-path="root/master"] .reason`: "the condition is true",
	} {
		if got := eval[string](b, `(document.querySelector('`+sel+`') || {}).textContent`); !strings.Contains(got, want) {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	b.shot("test-event-explained")

	// Hit counts: the deploy started them from zero; a webhook through
	// squall dev's engine makes one, and the filter of rules without a
	// match since the deploy then shows none.
	ruleHits := `document.querySelector('#tree button[data-key="` + ruleKey + `"] .hits')`
	untilTree := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`(document.getElementById('tree-reload').click(), `+expr+`)`,
			chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(300*time.Millisecond))
	}
	b.do("no hits since the deploy",
		chromedp.Click(chromedp.CSS(`#tab-tree`)),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/tree'`), // the active tree: the tab remembers the draft
		until(`document.getElementById('tree-source').value === 'active'`),
		untilTree(ruleHits+`?.dataset.hits === '0' && `+ruleHits+`.textContent.includes('never')`),
		chromedp.Click(chromedp.CSS(`#tree-dead`)),
		until(`document.getElementById('tree-dead').checked && document.querySelector('#tree button[data-key="`+ruleKey+`"]') !== null`),
		chromedp.Click(chromedp.CSS(`#tree-dead`)),
	)
	hook := readTrimmed(t, filepath.Join(dir, "squall-data", dev.WebhookTokenFile))
	if code, body := apitest.Call(t.Context(), http.MethodPost, base+"/engine/webhook/event/"+dev.WebhookID+"?token="+hook, "",
		strings.NewReader(`{"host": "web-1", "message": "Disk 95% full on /var"}`), "application/json"); code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, body)
	}
	b.do("a hit",
		untilTree(ruleHits+`?.dataset.hits === '1'`),
		until(`/1 hit, last (now|\d+s ago)/.test(`+ruleHits+`.textContent)`),
		until(`document.querySelector('#tree button[data-key="root,master,disks"] .hits')?.dataset.hits === '1'`),
		chromedp.Click(chromedp.CSS(`#tree-dead`)),
		until(`document.getElementById('tree-none')?.textContent === 'Every rule matched since the deploy.'`),
		chromedp.Click(chromedp.CSS(`#tree-dead`)),
		until(`document.querySelector('#tree button[data-key="`+ruleKey+`"]') !== null`),
	)
	b.shot("tree-hits")

	b.do("page the findings",
		chromedp.Click(chromedp.CSS(`#tab-findings`)),
		until(`document.querySelectorAll('#findings-table tbody tr[data-uid]').length === 25`),
		until(`document.getElementById('findings-page').textContent === 'page 1 of 2 (30 findings)'`),
		chromedp.Click(chromedp.CSS(`#findings-next`)),
		until(`document.querySelectorAll('#findings-table tbody tr[data-uid]').length === 5`),
		until(`location.hash === '#/findings?page=2'`),
		chromedp.Reload(),
		until(`document.getElementById('findings-page').textContent === 'page 2 of 2 (30 findings)' && document.querySelectorAll('#findings-table tbody tr[data-uid]').length === 5`),
		chromedp.Click(chromedp.CSS(`#findings-prev`)),
		until(`document.querySelectorAll('#findings-table tbody tr[data-uid]').length === 25`),
		setValue(`#findings-form input[name="monitored_domain"]`, "2"),
		chromedp.Click(chromedp.CSS(`#findings-form button[type="submit"]`)),
		until(`document.getElementById('findings-page').textContent === 'page 1 of 1 (10 findings)'`),
		chromedp.Click(chromedp.CSS(`#findings-table tbody tr[data-uid]`)),
		until(`document.querySelector('#finding-details form') !== null`),
	)
	uid := eval[string](b, `document.querySelector('#findings-table tbody tr[data-uid]').dataset.uid`)
	b.do("the finding's address",
		until(`location.hash === '#/findings/`+uid+`?monitored_domain=2'`),
		chromedp.Reload(),
		until(`document.querySelector('#finding-details h2')?.textContent === 'Finding `+uid+`' && document.querySelector('#findings-form input[name="monitored_domain"]').value === '2'`),
		until(`document.getElementById('findings-page').textContent === 'page 1 of 1 (10 findings)'`),
	)
	b.do("no finding: nothing to page",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/findings?username=nobody%40example.com'`),
		until(`document.getElementById('findings-page').textContent === 'no finding' && document.getElementById('findings-prev').disabled && document.getElementById('findings-next').disabled`),
		chromedp.Evaluate[chromedp.Void](`history.back()`),
		until(`document.querySelector('#finding-details h2')?.textContent === 'Finding `+uid+`'`),
	)
	if eval[bool](b, `document.getElementById('finding-details').textContent.includes('"plain_text": "pw')`) {
		t.Error("the finding's password is shown before it is asked for")
	}
	b.do("triage a finding",
		setValue(`#finding-details select[name="state"]`, "Resolved"),
		setValue(`#finding-details input[name="ticket"]`, "SEC-42"),
		chromedp.Click(chromedp.CSS(`#finding-details button[type="submit"]`)),
		until(`document.querySelector('#findings-table tbody tr[data-uid="`+uid+`"] td[data-state="Resolved"]') !== null`),
	)
	b.shot("findings")
	code, f := apitest.Call(t.Context(), http.MethodGet, base+"/intel/api/sdk/v0/finding/"+uid, token, nil, "")
	var got struct {
		Findings []struct {
			State  string  `json:"state"`
			Ticket *string `json:"ticket"`
		} `json:"findings"`
	}
	if code != http.StatusOK || json.Unmarshal(f, &got) != nil || len(got.Findings) != 1 || got.Findings[0].State != "Resolved" || got.Findings[0].Ticket == nil || *got.Findings[0].Ticket != "SEC-42" {
		t.Errorf("the finding after the triage: %d %s", code, f)
	}

	// A separate satellite and engine attached to squall dev's broker
	// report to its master over HTTP, as in a deployment.
	kafkaAddr := logField(t, d.p.Logs.String(), "squall dev started", "kafka")
	tokenFile := filetest.Write(t, dir, "fleet.token", token+"\n")
	hooks := t.TempDir()
	sat := startSatellite(t, nil, "--name", "sat-par", "--site", "par",
		"--kafka-brokers", kafkaAddr, "--webhooks-dir", hooks, "--spool-dir", filepath.Join(t.TempDir(), "spool"),
		"--master", base, "--master-token-file", tokenFile, "--fleet-interval", "300ms")
	eng := startEngine(t, nil, "--name", "eng-par", "--site", "par",
		"--kafka-brokers", kafkaAddr, "--group", "console-fleet", "--master", base, "--token-file", tokenFile, "--fleet-interval", "300ms",
		// Not the webhook event of the hits above: this engine has no
		// archive settings, and would dead-letter it.
		"--kafka-start-offset", "latest")

	member := func(key string) string {
		return `document.querySelector('#fleet-members tr[data-member="` + key + `"]')`
	}
	b.do("see the fleet",
		chromedp.Click(chromedp.CSS(`#tab-fleet`)),
		untilReloaded(`['master/dev', 'engine/dev', 'satellite/dev', 'engine/eng-par', 'satellite/sat-par'].every(k => document.querySelector('#fleet-members tr[data-member="' + k + '"]') !== null)`),
		untilReloaded(member("satellite/sat-par")+`.querySelector('td[data-ready="true"]') !== null && `+
			member("engine/eng-par")+`.querySelector('td[data-ready="true"]') !== null && `+
			member("satellite/dev")+`.querySelector('td[data-ready="true"]') !== null`),
		untilReloaded(member("master/dev")+`.querySelector('td[data-health="ready"]') !== null && /applied \d+ \/ commit \d+/.test(`+member("master/dev")+`.querySelector('td[data-raft]').textContent)`),
		until(member("satellite/sat-par")+`.textContent.includes('par') && `+member("satellite/sat-par")+`.textContent.includes('squall ')`),
		// Engines' events per second, from their last two heartbeats.
		untilReloaded(member("engine/dev")+`.querySelector('td[data-rate]').dataset.rate !== '' && `+
			member("engine/eng-par")+`.querySelector('td[data-rate]').dataset.rate !== ''`),
	)
	// The satellite stops: the list marks it stale.
	if err := sat.End(t, syscall.SIGTERM); err != nil {
		t.Errorf("squall satellite: %v\n%s", err, sat.Logs.String())
	}
	b.do("a stale member",
		untilReloaded(member("satellite/sat-par")+`?.dataset.stale === 'true' && document.getElementById('fleet-stale') !== null`),
		until(member("engine/eng-par")+`.dataset.stale === 'false' && `+member("satellite/sat-par")+`.querySelector('td[data-health="stale"]') !== null`),
	)
	b.shot("fleet")
	// The engine stops too: its consumer group's partitions have no live
	// engine, and the fleet says so.
	b.do("no unowned partitions while the engine runs",
		until(`document.querySelector('p[data-unowned-group]') === null`))
	_ = eng.End(t, os.Interrupt)
	b.do("partitions without a live engine",
		untilReloaded(`document.querySelector('p[data-unowned-group="console-fleet"]')?.textContent.includes('no live engine') === true`),
		until(`document.querySelector('p[data-unowned-group="squall-engine"]') === null`))

	// Two dead letters of a failing http action, as an engine writes them:
	// the tab groups and counts their reason, shows one, and replays it.
	dlw, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: kafkasource.Dial{Brokers: []string{kafkaAddr}, Timeout: 2 * time.Second}, Topic: engine.DefaultDLQTopic})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		err := dlw.Write(t.Context(), kafkasource.Record{Key: []byte("master"), Value: fmt.Appendf(nil, `{"type": "disk_alert", "n": %d}`, i), Headers: []kafkasource.Header{
			{Key: "squall-event-id", Value: fmt.Appendf(nil, "console-dl-%d", i)},
			{Key: deadletter.HeaderError, Value: []byte("action 0 (http): status 500")},
			{Key: deadletter.HeaderErrorStage, Value: []byte("action")},
			{Key: deadletter.HeaderErrorActions, Value: []byte("0:http")},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := dlw.Close(); err != nil {
		t.Fatal(err)
	}
	b.do("see the dead letters",
		chromedp.Click(chromedp.CSS(`#tab-deadletters`)),
		until(`document.querySelector('#deadletters-reasons tr[data-reason="action http"] td[data-count="2"]') !== null`),
		until(`document.querySelectorAll('#deadletters-table tbody tr[data-id]').length === 2`),
		chromedp.Click(chromedp.CSS(`#deadletters-table tbody tr[data-id]`)),
		until(`document.getElementById('deadletter-event') !== null && document.getElementById('deadletter-event').textContent.includes('"type": "disk_alert"')`),
	)
	b.shot("deadletters")
	b.do("replay a dead letter",
		chromedp.Click(chromedp.CSS(`#deadletter-replay`)),
		until(`document.getElementById('deadletter-replay-result').dataset.status === 'replayed'`),
		until(`document.querySelectorAll('#deadletters-table tbody tr[data-id] [data-replayed]').length === 1`),
	)
	b.do("replay the rest of a reason",
		chromedp.Click(chromedp.CSS(`#deadletters-reasons button[data-replay-reason="action http"]`)),
		until(`document.querySelector('#deadletters-reasons button[data-replay-reason="action http"]').textContent.startsWith('Confirm')`),
		chromedp.Click(chromedp.CSS(`#deadletters-reasons button[data-replay-reason="action http"]`)),
		until(`document.getElementById('deadletters-replay-summary')?.dataset.replayed === '1'`),
		until(`document.querySelectorAll('#deadletters-table tbody tr[data-id] [data-replayed]').length === 2`),
	)
	// The admin's changes are in the audit log; a filter narrows it.
	b.do("read the audit log",
		chromedp.Click(chromedp.CSS(`#tab-audit`)),
		until(`document.querySelector('#audit-table tbody tr[data-action="draft.create"]') !== null`),
		setValue(`#audit-form input[name="action"]`, "draft.create"),
		chromedp.Click(chromedp.CSS(`#audit-form button[type="submit"]`)),
		until(`(() => { const rows = [...document.querySelectorAll('#audit-table tbody tr[data-action]')]; return rows.length > 0 && rows.every((r) => r.dataset.action === 'draft.create'); })()`),
	)
	b.shot("audit")

	// A viewer signs in by pasting an unsigned token (squall dev accepts
	// them): what the role forbids is hidden, and the server refuses it
	// anyway.
	viewer := base64.StdEncoding.EncodeToString([]byte(`{"user": "viewer", "auths": {"all": {"path": ["root"], "roles": ["view"]}, "tenant": {"path": ["root", "master"], "roles": ["view"]}}}`))
	b.switchUser(viewer, "viewer")
	b.do("a viewer sees the draft read only",
		chromedp.Click(chromedp.CSS(`#tab-draft`)),
		until(`document.getElementById('draft-info').textContent.includes('owned by admin')`),
		until(`document.querySelector('#draft-tree button[data-key="`+ruleKey+`"]') !== null`),
		chromedp.Click(chromedp.CSS(`#draft-tree button[data-key="`+ruleKey+`"]`)),
		until(`document.getElementById('draft-editor').textContent.includes('Read only')`),
	)
	for _, sel := range []string{"#draft-create", "#draft-takeover", "#draft-deploy", "#event-full", `#draft-editor button[type="submit"]`, "#tab-deadletters", "#tab-audit"} {
		if eval[bool](b, `(() => { const e = document.querySelector('`+sel+`'); return e !== null && !e.hidden && !e.disabled && (e.tagName === 'OPTION' || e.offsetParent !== null); })()`) {
			t.Errorf("%s is shown to a viewer", sel)
		}
	}
	if code, body := apitest.Call(t.Context(), http.MethodPost, base+"/api/v2_beta/config/drafts/all", viewer, nil, ""); code != http.StatusForbidden {
		t.Errorf("a viewer created a draft: %d %s", code, body)
	}
	b.shot("viewer")

	// An authorization below root: its tree starts at its node, and the
	// addresses, from root, are the same for it.
	b.do("a scoped authorization opens the same addresses",
		setValue(`#auth-select`, "tenant"),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/tree/root/master/disks/archive_disk_alerts'`),
		until(`document.querySelector('#tree button[data-key="master,disks/archive_disk_alerts"][aria-current="true"]') !== null && document.getElementById('tree-details').textContent.includes('used_percent')`),
		chromedp.Click(chromedp.CSS(`#tree button[data-key="master,disks"]`)),
		until(`location.hash === '#/tree/root/master/disks'`),
		setValue(`#auth-select`, "all"),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/draft/root/master/disks/archive_disk_alerts'`),
		until(`document.querySelector('#draft-editor h2')?.textContent === 'Rule archive_disk_alerts'`),
	)

	// A console link opened in a tab signed in as someone else: the token
	// leaves the address at once, and the identity changes only when
	// asked (here: once refused, then accepted).
	openLink := chromedp.Evaluate[chromedp.Void](`location.hash = '#token=' + encodeURIComponent(` + strconv.Quote(token) + `)`)
	b.do("a link for another user, refused",
		openLink,
		until(`document.getElementById('identity-switch') !== null && location.hash === '#/draft/root/master/disks/archive_disk_alerts'`),
		until(`document.getElementById('identity-switch').textContent.includes('signs in as admin; you are signed in as viewer')`),
		chromedp.Click(chromedp.CSS(`#identity-switch-stay`)),
		until(`document.getElementById('identity-switch') === null`),
	)
	if got := eval[string](b, `document.getElementById('who-user').textContent + ' ' + sessionStorage.getItem('squall.token')`); got != "viewer "+viewer {
		t.Errorf("after refusing the switch: %q, want the viewer still signed in", got)
	}
	b.do("a link for another user, accepted",
		openLink,
		until(`document.getElementById('identity-switch') !== null && location.hash === '#/draft/root/master/disks/archive_disk_alerts'`),
		chromedp.Evaluate[chromedp.Void](`window.beforeSwitch = true`),
		chromedp.Click(chromedp.CSS(`#identity-switch-accept`)),
	)
	// Accepting reloads the page: poll across the reload (an evaluation
	// during it fails), until the new page is signed in as admin.
	signedInAs := ""
	for deadline := time.Now().Add(20 * time.Second); signedInAs != "admin" && time.Now().Before(deadline); {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.beforeSwitch === undefined && document.getElementById('who-user') ? document.getElementById('who-user').textContent : ''`))
		if err == nil {
			signedInAs = v
		}
		if signedInAs != "admin" {
			pause(t)
		}
	}
	if signedInAs != "admin" {
		t.Fatalf("after accepting the switch the page is signed in as %q, want admin", signedInAs)
	}
	if h := eval[string](b, `location.hash`); h != "#/draft/root/master/disks/archive_disk_alerts" {
		t.Errorf("after the switch the address is %q, want the draft's rule still (and no token)", h)
	}

	// A narrow window: nothing wider than the viewport.
	b.do("narrow window",
		chromedp.EmulateViewport(380, 800),
		chromedp.Click(chromedp.CSS(`#tab-tree`)),
		until(`document.querySelector('#tree button[data-key="`+ruleKey+`"]') !== null`),
		until(`document.documentElement.scrollWidth <= window.innerWidth`),
	)
	// The deploy made version 1, by admin, shown above the tree.
	b.do("the deploy's version", until(`document.getElementById('tree-info').dataset.version === '1' && /^Active tree: version 1, deployed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by admin\.$/.test(document.getElementById('tree-info').textContent)`))
	b.shot("narrow")

	// History: a second deploy (through the API) changes the rule's
	// description; the tab lists both versions, shows their diff, and
	// rolls back to version 1 after a confirmation, forced past a draft.
	deploySecondVersion(t, base, token)
	cfgDraft := base + "/api/v2_beta/config/drafts/all"
	if code, body := apitest.Call(t.Context(), http.MethodPost, cfgDraft, token, nil, ""); code != http.StatusOK {
		t.Fatalf("create a draft: %d %s", code, body)
	}
	b.do("list the versions",
		chromedp.EmulateViewport(1280, 860),
		chromedp.Click(chromedp.CSS(`#tab-history`)),
		until(`location.hash === '#/history' && document.querySelectorAll('#history-table tbody tr[data-version]').length === 2`),
		until(`document.querySelector('#history-table tbody tr[data-version="2"][data-active="true"]')?.textContent.includes('second version') && document.querySelector('#history-table tbody tr[data-version="1"] button.rollback') !== null`),
	)
	b.do("the diff of two versions",
		chromedp.Click(chromedp.CSS(`#history-table tr[data-version="1"] input[type="checkbox"]`)),
		chromedp.Click(chromedp.CSS(`#history-table tr[data-version="2"] input[type="checkbox"]`)),
		chromedp.Click(chromedp.CSS(`#history-compare`)),
		until(`location.hash === '#/history/2?from=1'`),
		until(`document.querySelector('#history-diff .diff-text')?.textContent === 'From version 1 to version 2: 1 rule changed.' && document.querySelector('#history-diff .diff-rule[data-rule="archive_disk_alerts"][data-change="changed"]') !== null`),
		until(`document.querySelector('#history-diff h2').textContent.includes('1 node with a change')`),
	)
	b.shot("history-diff")
	b.do("rollback refused while a draft exists, then forced",
		chromedp.Click(chromedp.CSS(`#history-table tr[data-version="1"] button.rollback`)),
		until(`document.getElementById('rollback-dialog').open && document.querySelector('#rollback-diff .diff-text')?.textContent === 'The active tree changes: 1 rule changed.'`),
		setValue(`#rollback-message`, "back to the first"),
		chromedp.Click(chromedp.CSS(`#rollback-confirm`)),
		until(`document.getElementById('rollback-error').textContent.includes('A draft exists') && !document.getElementById('rollback-force').hidden`),
		chromedp.Click(chromedp.CSS(`#rollback-force`)),
		until(`!document.getElementById('rollback-dialog').open && document.getElementById('status').textContent === 'Rolled back to version 1: the active tree is version 3.'`),
		until(`document.querySelector('#history-table tbody tr[data-version="3"][data-active="true"]')?.textContent.includes('back to the first (rollback to 1)')`),
	)
	var listed struct {
		Versions []struct {
			Number     int    `json:"number"`
			Hash       string `json:"hash"`
			RollbackOf int    `json:"rollback_of"`
		} `json:"versions"`
	}
	code, body := apitest.Call(t.Context(), http.MethodGet, base+"/squall/v1/tree/versions?auth=all", token, nil, "")
	if err := json.Unmarshal(body, &listed); code != http.StatusOK || err != nil || len(listed.Versions) != 3 {
		t.Fatalf("the versions after the rollback: %d %s (%v)", code, body, err)
	}
	if v3, v1 := listed.Versions[0], listed.Versions[2]; v3.Number != 3 || v3.RollbackOf != 1 || v1.Number != 1 || v3.Hash != v1.Hash {
		t.Errorf("after the rollback the versions are %+v, want version 3 a rollback to 1 with its tree", listed.Versions)
	}
	_, activeTree := apitest.Call(t.Context(), http.MethodGet, base+"/squall/v1/tree/versions/active?auth=all", token, nil, "")
	_, firstTree := apitest.Call(t.Context(), http.MethodGet, base+"/squall/v1/tree/versions/1?auth=all", token, nil, "")
	if string(activeTree) != string(firstTree) || len(firstTree) == 0 {
		t.Errorf("the active tree after the rollback is not version 1's:\n%s\n%s", activeTree, firstTree)
	}
	b.do("a version's address survives a reload",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history/2'`),
		until(`document.querySelector('#history-diff .diff-text')?.textContent === 'From the active tree to version 2: 1 rule changed.'`),
		chromedp.Reload(),
		until(`location.hash === '#/history/2' && !document.getElementById('view-history').hidden`),
		until(`document.querySelector('#history-diff .diff-text')?.textContent === 'From the active tree to version 2: 1 rule changed.' && document.querySelector('#history-table tr[data-version="2"].selected') !== null`),
	)
	b.shot("history")

	// The draft's rule tests: listed on the Draft tab, run there (pass and
	// fail with the failure's text), and a deploy refused with their
	// failures; the History tab's page is in the address.
	draftTestsAndHistoryPages(t, b, base, token)

	b.switchUser(viewer, "viewer")
	b.do("a viewer reads the history and may not roll back",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history'`),
		until(`document.querySelectorAll('#history-table tbody tr[data-version]').length === 20 && !document.getElementById('tab-history').hidden`),
		until(`document.querySelector('#history-table button.rollback') === null`),
	)

	// A findings-only token (findings_read on tenant master, no tree
	// role: decision 8) sees the findings, and no tree.
	scanner := base64.StdEncoding.EncodeToString([]byte(`{"user": "scanner", "auths": {"findings": {"path": ["root", "master"], "roles": ["findings_read"]}}}`))
	b.switchUser(scanner, "scanner")
	b.do("a findings-only token sees the findings and no tree",
		until(`document.getElementById('findings-page').textContent === 'page 1 of 2 (30 findings)'`),
		until(`document.getElementById('tab-tree').hidden && document.getElementById('tab-findings').getAttribute('aria-selected') === 'true'`),
	)

	if errs := b.pageErrors(); len(errs) != 0 {
		t.Errorf("the page reported errors: %q", errs)
	}
	// The CSP is in force: an injected inline script does not run, and
	// the browser reports it (so the check above would have seen one).
	b.do("inline script refused",
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.createElement('script'); s.textContent = 'window.inlineRan = true'; document.body.append(s); })()`),
		until(`window.inlineRan === undefined`),
	)
	deadline := time.Now().Add(10 * time.Second)
	var csp []string
	for len(csp) == 0 && time.Now().Before(deadline) {
		csp = append(csp, b.pageErrors()...)
		if len(csp) == 0 {
			pause(t)
		}
	}
	if len(csp) == 0 || !strings.Contains(strings.Join(csp, " "), "Content Security Policy") {
		t.Errorf("no CSP report for an inline script: %q", csp)
	}
	t.Logf("screenshots in %s", b.dir)
}

// deploySecondVersion deploys, through the API, a draft of the active
// tree whose rule archive_disk_alerts has another description, with the
// message "second version".
func deploySecondVersion(t *testing.T, base, token string) {
	t.Helper()
	cfg := base + "/api/v2_beta/config"
	code, body := apitest.Call(t.Context(), http.MethodPost, cfg+"/drafts/all", token, nil, "")
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &d); code != http.StatusOK || err != nil || d.ID == "" {
		t.Fatalf("create a draft: %d %s (%v)", code, body, err)
	}
	rule := cfg + "/draft/rule/details/all/" + d.ID + "/root,master,disks/archive_disk_alerts"
	code, body = apitest.Call(t.Context(), http.MethodGet, rule, token, nil, "")
	var r map[string]json.RawMessage
	if err := json.Unmarshal(body, &r); code != http.StatusOK || err != nil {
		t.Fatalf("read the draft's rule: %d %s (%v)", code, body, err)
	}
	put := map[string]json.RawMessage{"description": json.RawMessage(`"Changed for the second version"`)}
	for _, k := range []string{"name", "continue", "active", "constraint", "actions"} {
		put[k] = r[k]
	}
	b, err := json.Marshal(put)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apitest.Call(t.Context(), http.MethodPut, rule, token, strings.NewReader(string(b)), "application/json"); code != http.StatusOK {
		t.Fatalf("edit the draft's rule: %d %s", code, body)
	}
	if code, body := apitest.Call(t.Context(), http.MethodPost, cfg+"/drafts/all/"+d.ID+"/deploy?message=second%20version", token, nil, ""); code != http.StatusOK {
		t.Fatalf("deploy the second version: %d %s", code, body)
	}
}

// TestMountConsole_Cluster: every master of a 3-node cluster serves the
// console; a heartbeat sent to a follower reaches the leader, and the
// fleet read from the other follower lists the three masters (one
// leader) and the engine; only the leader exposes the partitions of the
// engine's consumer group that it does not own.
func TestMountConsole_Cluster(t *testing.T) {
	t.Parallel()
	var regs [3]*prometheus.Registry
	c := mastertest.TestCluster(t, 3, mastertest.WithSetup(func(i int, s *master.Server) {
		regs[i] = prometheus.NewRegistry()
		if _, err := node.MountConsole(s, console.Options{}, fleet.Default(), regs[i], nil); err != nil {
			t.Error(err)
		}
	}))
	ctx := t.Context()
	for i := range 3 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(i)+"/ui/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := calltest.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("node %d /ui/: %d CSP %q", i, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
		// A master's page is not squall dev's: it does not offer the
		// dev example's test event.
		if strings.Contains(string(page), `data-mode="dev"`) {
			t.Errorf("node %d /ui/ is marked as squall dev's", i)
		}
	}
	f := c.Followers()
	engineToken := c.Token(auth.Claims{User: "engine", Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: []string{"view", "fleet_report"}}}})
	if code, body := apitest.Call(ctx, http.MethodPut, c.URL(f[0])+"/squall/v1/fleet/engine/e1", engineToken,
		strings.NewReader(`{"site": "par", "version": "v1", "ready": true, "consumer_lag": 0,
			"kafka_group": "g", "kafka_topic": "squall.events", "partitions": [0], "topic_partitions": 2}`), "application/json"); code != http.StatusOK {
		t.Fatalf("heartbeat through follower %d: %d %s", f[0], code, body)
	}
	code, body := apitest.Call(ctx, http.MethodGet, c.URL(f[1])+"/squall/v1/fleet", engineToken, nil, "")
	var list struct {
		Members []struct {
			ID     string `json:"id"`
			Role   string `json:"role"`
			Leader bool   `json:"leader"`
			Site   string `json:"site"`
		} `json:"members"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("fleet through follower %d: %d %s", f[1], code, body)
	}
	roles := map[string]int{}
	leaders := 0
	for _, m := range list.Members {
		roles[m.Role]++
		if m.Leader {
			leaders++
		}
	}
	if roles["master"] != 3 || roles["engine"] != 1 || leaders != 1 || list.Members[3].Site != "par" {
		t.Errorf("fleet: %s", body)
	}
	for i, reg := range regs {
		n, err := testutil.GatherAndCount(reg, "squall_fleet_partitions_unowned")
		want := 0
		if i == c.Leader() {
			want = 1
			if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP squall_fleet_partitions_unowned Partitions of a consumer group's topic that no live engine (one that reported within --fleet-stale-after) owns, on the leader.
# TYPE squall_fleet_partitions_unowned gauge
squall_fleet_partitions_unowned{group="g",topic="squall.events"} 1
`), "squall_fleet_partitions_unowned"); err != nil {
				t.Errorf("leader %d: %v", i, err)
			}
		}
		if err != nil || n != want {
			t.Errorf("node %d: %d series of squall_fleet_partitions_unowned (%v), want %d", i, n, err, want)
		}
	}
}

// draftTestsAndHistoryPages attaches two test cases to the draft (one
// fails on it), runs them on the Draft tab, sees a deploy refused with the
// failure, then deploys 20 versions more and pages the History tab: the
// page is in the address, a reload and back keep it.
func draftTestsAndHistoryPages(t *testing.T, b *browser, base, token string) {
	t.Helper()
	const tests = `{"files":[{"name":"disks.json","content":{"cases":[
		{"name":"disk alerts are archived","event":{"type":"disk_alert","created_ms":1,"payload":{"host":"db1","message":"disk at 91%"},"metadata":{"tenant_id":"master"}},"match":["root/master/disks/archive_disk_alerts"]},
		{"name":"cpu alerts are archived","event":{"type":"cpu_alert","created_ms":1,"payload":{"host":"db1","message":"cpu at 99%"},"metadata":{"tenant_id":"master"}},"match":["root/master/disks/archive_disk_alerts"]}]}}]}`
	if code, body := apitest.Call(t.Context(), http.MethodPut, base+"/squall/v1/draft/tests?auth=all", token, strings.NewReader(tests), "application/json"); code != http.StatusOK {
		t.Fatalf("put the draft's tests: %d %s", code, body)
	}
	row := func(name string) string {
		return `document.querySelector('#draft-tests-table tr[data-case="` + name + `"]')`
	}
	b.do("the draft's tests, run",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/draft'`),
		until(`!document.getElementById('draft-tests').hidden && `+row("cpu alerts are archived")+`?.dataset.result === 'not-run'`),
		chromedp.Click(chromedp.CSS(`#draft-tests-run`)),
		until(row("disk alerts are archived")+`?.dataset.result === 'passed' && `+row("cpu alerts are archived")+`?.dataset.result === 'failed'`),
		until(row("cpu alerts are archived")+`.querySelector('.failures').textContent === 'root/master/disks/archive_disk_alerts: match: expected Matched, got NotMatched'`),
		until(`document.getElementById('draft-tests-summary').textContent === '1 of 2 cases failed: a deploy is refused until they pass.'`),
	)
	b.shot("draft-tests")
	b.do("a deploy refused by the tests",
		chromedp.Reload(),
		until(row("cpu alerts are archived")+`?.dataset.result === 'not-run'`),
		chromedp.Click(chromedp.CSS(`#draft-deploy`)),
		until(`document.getElementById('deploy-dialog').open`),
		chromedp.Click(chromedp.CSS(`#deploy-confirm`)),
		until(`document.getElementById('status').textContent.startsWith('Deploy: TESTS_FAILED: 1 of the draft') && `+row("cpu alerts are archived")+`?.dataset.result === 'failed'`),
	)
	// 20 versions more: 23 in all, two pages.
	if code, body := apitest.Call(t.Context(), http.MethodPut, base+"/squall/v1/draft/tests?auth=all", token, strings.NewReader(`{"files":[]}`), "application/json"); code != http.StatusOK {
		t.Fatalf("remove the draft's tests: %d %s", code, body)
	}
	for range 20 {
		d := mustDraftIDHTTP(t, base, token)
		if code, body := apitest.Call(t.Context(), http.MethodPost, base+"/api/v2_beta/config/drafts/all/"+d+"/deploy", token, nil, ""); code != http.StatusOK {
			t.Fatalf("deploy: %d %s", code, body)
		}
	}
	b.do("the History tab's pages",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history'`),
		until(`document.querySelectorAll('#history-table tbody tr[data-version]').length === 20 && document.getElementById('history-page').textContent === 'page 1'`),
		chromedp.Click(chromedp.CSS(`#history-next`)),
		until(`location.hash === '#/history?page=2' && document.querySelectorAll('#history-table tbody tr[data-version]').length === 3 && document.querySelector('#history-table tbody tr[data-version="1"]') !== null`),
		chromedp.Reload(),
		until(`location.hash === '#/history?page=2' && document.getElementById('history-page').textContent === 'page 2' && document.querySelectorAll('#history-table tbody tr[data-version]').length === 3`),
		chromedp.Click(chromedp.CSS(`#history-table tr[data-version="2"] a`)),
		until(`location.hash === '#/history/2?page=2' && document.querySelector('#history-table tr[data-version="2"].selected') !== null`),
		chromedp.Evaluate[chromedp.Void](`history.back()`),
		until(`location.hash === '#/history?page=2' && document.querySelectorAll('#history-table tbody tr[data-version]').length === 3`),
		chromedp.Click(chromedp.CSS(`#history-prev`)),
		until(`location.hash === '#/history' && document.querySelectorAll('#history-table tbody tr[data-version]').length === 20`),
		chromedp.Evaluate[chromedp.Void](`history.back()`),
		until(`location.hash === '#/history?page=2' && document.getElementById('history-page').textContent === 'page 2'`),
	)
}

// mustDraftIDHTTP returns the id of the master's draft (the only one).
func mustDraftIDHTTP(t *testing.T, base, token string) string {
	t.Helper()
	code, body := apitest.Call(t.Context(), http.MethodGet, base+"/api/v2_beta/config/drafts/all", token, nil, "")
	var ids []string
	if err := json.Unmarshal(body, &ids); code != http.StatusOK || err != nil || len(ids) != 1 {
		t.Fatalf("the draft's id: %d %s (%v)", code, body, err)
	}
	return ids[0]
}
