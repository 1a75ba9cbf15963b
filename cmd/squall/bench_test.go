package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/squallhq/squall/dev"
	"github.com/squallhq/squall/internal/bench"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master/mastertest"
)

// benchJSON runs squall bench webhook --json with args and decodes its
// summary; the run must exit 0.
func benchJSON(t *testing.T, args ...string) (bench.Result, string) {
	t.Helper()
	code, stdout, stderr := runBinary(t, append([]string{"bench", "webhook", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("squall bench webhook exited %d:\n%s\n%s", code, stdout, stderr)
	}
	var r bench.Result
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the --json summary does not parse: %v\n%s", err, stdout)
	}
	return r, stderr
}

// TestBenchWebhookDev runs squall bench webhook for 2 s at a low rate
// against a real squall dev and checks its counts against the intake's
// metrics: every 200 it counted, the intake accepted.
func TestBenchWebhookDev(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	d := startDev(t, work)
	token := readTrimmed(t, filepath.Join(work, "squall-data", dev.WebhookTokenFile))
	url := "http://" + d.addr + "/engine/webhook/event/" + dev.WebhookID + "?token=" + token
	r, stderr := benchJSON(t, "--url", url, "--connections", "4", "--rate", "20", "--duration", "2s")
	if r.Scheduled != 40 || r.Answered == 0 || r.Status["200"] != r.Answered || r.Sent != r.Answered || r.Errors != 0 ||
		r.Sent+r.Missed != 40 || r.LatencyFrom != "intended" || r.Connections != 4 {
		t.Errorf("summary %+v; want 40 scheduled, all answered 200", r)
	}
	t.Logf("summary %+v\n%s", r, stderr)
	if strings.Contains(r.URL, token) || strings.Contains(stderr, token) {
		t.Errorf("the webhook token is in the output: %s\n%s", r.URL, stderr)
	}
	if n := len(regexp.MustCompile(`(?m)^bench +\d+s .* req/s .* p99 `).FindAllString(stderr, -1)); n < 1 {
		t.Errorf("no progress line on standard error:\n%s", stderr)
	}
	resp, err := calltest.Client().Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	accepted := metricValue(t, string(metrics), `squall_intake_requests_total{code="200",webhook="`+dev.WebhookID+`"}`)
	forwarded := metricValue(t, string(metrics), `squall_forward_events_total{path="kafka"}`) +
		metricValue(t, string(metrics), `squall_forward_events_total{path="spool"}`)
	if accepted != r.Status["200"] || forwarded != r.Status["200"] {
		t.Errorf("bench counted %d answers 200; the intake accepted %d and forwarded %d", r.Status["200"], accepted, forwarded)
	}
}

// metricValue returns the value of a series in a Prometheus text
// exposition.
func metricValue(t *testing.T, text, series string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in the metrics:\n%s", series, text)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBenchWebhookStatus counts the answers of a target answering 500
// and 429, and the headers and body it sent.
func TestBenchWebhookStatus(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := map[int]uint64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		code := http.StatusInternalServerError
		mu.Lock()
		if (served[500]+served[429])%3 == 0 {
			code = http.StatusTooManyRequests
		}
		if string(body) != `{"a": 1}`+"\n" || r.Header.Get("X-Tenant") != "acme" || r.Header.Get("Content-Type") != "text/plain" {
			code = http.StatusBadRequest
		}
		served[code]++
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	body := filetest.Write(t, t.TempDir(), "body.json", `{"a": 1}`+"\n")
	args := []string{"--url", srv.URL + "/hook", "--connections", "3", "--requests", "30", "--duration", "1m",
		"--body-file", body, "--header", "X-Tenant: acme", "--header", "Content-Type:text/plain"}
	r, _ := benchJSON(t, args...)
	mu.Lock()
	want := map[string]uint64{"429": served[429], "500": served[500]}
	mu.Unlock()
	if r.Sent != 30 || r.Answered != 30 || r.Non2xx != 30 || r.Errors != 0 || len(r.Status) != 2 ||
		r.Status["429"] != want["429"] || r.Status["500"] != want["500"] || want["429"] != 10 {
		t.Errorf("status %v, answered %d; the target answered %v", r.Status, r.Answered, want)
	}

	// The table for people.
	code, stdout, stderr := runBinary(t, append([]string{"bench", "webhook"}, args...)...)
	if code != 0 || !strings.Contains(stdout, "429: 10, 500: 20") || !strings.Contains(stdout, "30 (30 not 2xx)") {
		t.Errorf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
}

// TestBenchWebhookRefused checks the exit codes and messages of runs that
// cannot start or never get an answer.
func TestBenchWebhookRefused(t *testing.T) {
	t.Parallel()
	// A port that refuses connections and stays bound: a port freed by
	// closing a listener may be taken by a server of a test running
	// alongside.
	closed := mastertest.RefusedAddr(t)
	// A target that accepts connections and closes them without a word.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() })
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"refused", []string{"--url", "http://" + closed + "/engine/webhook/event/x?token=s3cret"}, "the target could not be reached: " + closed},
		{"never answers", []string{"--url", "http://" + mute.Addr().String() + "/x?token=s3cret", "--requests", "5", "--connections", "1"}, "no request to http://" + mute.Addr().String() + "/x?token=REDACTED got an answer"},
		{"no url", nil, `required flag(s) "url" not set`},
		{"no host", []string{"--url", "http:///engine/webhook/event/x"}, "has no host"},
		{"header", []string{"--url", "http://" + closed, "--header", "X-Y"}, `--header "X-Y": want NAME:VALUE`},
		{"no duration", []string{"--url", "http://" + closed, "--duration", "0s"}, "every run is bounded in time"},
		{"body file", []string{"--url", "http://" + closed, "--body-file", filepath.Join(t.TempDir(), "none")}, "--body-file: open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runBinary(t, append([]string{"bench", "webhook", "--json"}, tt.args...)...)
			if code != 1 || !strings.Contains(stderr, tt.stderr) || strings.Contains(stderr+stdout, "s3cret") {
				t.Errorf("exit %d, want 1 with %q:\n%s\n%s", code, tt.stderr, stdout, stderr)
			}
		})
	}
	// The help says what the tool is for.
	_, stdout, _ := runBinary(t, "bench", "webhook", "--help")
	if !strings.Contains(stdout, benchWarning) {
		t.Errorf("the help lacks %q:\n%s", benchWarning, stdout)
	}
}

// TestBenchFindings inserts findings into a real squall master while
// reading pages, and checks that the master holds exactly the findings
// the summary counts as created.
func TestBenchFindings(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	token := unsignedToken(t, "bench", "findings=root,bench:findings_read,findings_write")
	tokenFile := filetest.Write(t, t.TempDir(), "token", token+"\n")
	code, stdout, stderr := runBinary(t, "bench", "findings", "--json", "--url", base, "--token-file", tokenFile,
		"--connections", "4", "--readers", "2", "--requests", "60", "--duration", "1m", "--page-size", "10", "--pages", "3")
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	var r bench.FindingsResult
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the --json summary does not parse: %v\n%s", err, stdout)
	}
	t.Logf("inserts %+v\npages %+v", r.Inserts, r.Pages)
	if r.Inserts.Sent != 60 || r.Inserts.Status["201"] != 60 || r.Inserts.Errors != 0 || r.Pages == nil ||
		r.Pages.Answered == 0 || r.Pages.Status["200"] != r.Pages.Answered || r.Pages.Errors != 0 {
		t.Errorf("inserts %+v\npages %+v\nwant 60 inserts answered 201, pages answered 200", r.Inserts, r.Pages)
	}
	if strings.Contains(stdout+stderr, token) {
		t.Error("the token is in the output")
	}
	// The master holds the 60 findings, each with the run's user name.
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/intel/api/sdk/v0/findings/credential?limit=1000", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := calltest.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Total    int `json:"total"`
		Findings []struct {
			Username string `json:"username"`
		} `json:"findings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, f := range list.Findings {
		if strings.HasPrefix(f.Username, "squall-bench-"+r.Run+"-") && strings.HasSuffix(f.Username, "@bench.invalid") {
			users[f.Username] = true
		}
	}
	if resp.StatusCode != http.StatusOK || list.Total != 60 || len(users) != 60 {
		t.Errorf("the master answered %d with %d findings, %d distinct of the run; want 60", resp.StatusCode, list.Total, len(users))
	}

	// The text summary, and a token that is not the tenant's: 403 counted.
	code, stdout, stderr = runBinary(t, "bench", "findings", "--url", base, "--token-file", tokenFile, "--connections", "1", "--readers", "0", "--requests", "3")
	if code != 0 || !strings.Contains(stdout, "inserts\ntarget       PUT "+base+"/intel/api/sdk/v0/findings/credentials") ||
		!strings.Contains(stdout, "201: 3") || strings.Contains(stdout, "\npages\n") {
		t.Errorf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	root := unsignedToken(t, "u", "all=root:admin")
	if err := os.WriteFile(tokenFile, []byte(root), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runBinary(t, "bench", "findings", "--json", "--url", base, "--token-file", tokenFile, "--connections", "1", "--readers", "1", "--requests", "2")
	if code != 0 || !strings.Contains(stdout, `"403": 2`) {
		t.Errorf("a token without a tenant: exit %d:\n%s\n%s", code, stdout, stderr)
	}
}
