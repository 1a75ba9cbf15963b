package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/dev"
)

// The Grafana dashboard (deploy/grafana) and the Prometheus alerting rules
// (deploy/prometheus) query metrics by name. TestDashboardMetrics starts
// the real binary, sends it traffic so that labelled series exist, scrapes
// its /metrics and fails for every metric (or label of a selector) that a
// panel or a rule uses and no role exposes: a renamed metric cannot leave
// a dashboard or an alert silently empty. promtool (in .ci/run) checks the
// rules' syntax and behaviour; this test checks their vocabulary.

const (
	dashboardFile  = "../../deploy/grafana/squall.json"
	alertRulesFile = "../../deploy/prometheus/squall-alerts.yaml"
	operationsDoc  = "../../docs/operations.md"
)

// TestDashboardMetrics checks every PromQL expression of the dashboard and
// of the alerting rules against the metrics of `squall dev`, which runs a
// master, a satellite's intake (with its spool and Kafka sink) and an engine
// with one registry.
func TestDashboardMetrics(t *testing.T) {
	t.Parallel()
	exprs := append(dashboardExprs(t, dashboardFile), alertExprs(t, alertRulesFile)...)
	if len(exprs) < 40 {
		t.Fatalf("only %d expressions in the dashboard and the rules", len(exprs))
	}

	dir := t.TempDir()
	d := startDev(t, dir)
	// One webhook through the example tree: the intake, Kafka, the engine
	// and the archive action create their labelled series.
	hook := readTrimmed(t, filepath.Join(dir, "squall-data", dev.WebhookTokenFile))
	code, body := apitest.Call(t.Context(), http.MethodPost, "http://"+d.addr+"/engine/webhook/event/"+dev.WebhookID+"?token="+hook, "",
		strings.NewReader(`{"host": "web-1", "message": "Disk 95% full on /var"}`), "application/json")
	if code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, body)
	}
	archiveLines(t, d, filepath.Join(dir, "squall-data", "archive", dev.ArchiveFile), 1)
	// And one refused call, for the refused-by-reason series.
	if code, body := apitest.Call(t.Context(), http.MethodPost, "http://"+d.addr+"/engine/webhook/event/"+dev.WebhookID+"?token=wrong", "",
		strings.NewReader(`{}`), "application/json"); code != http.StatusUnauthorized {
		t.Fatalf("webhook with a wrong token: %d %s", code, body)
	}
	exposed := scrapeMetrics(t, "http://"+d.addr+"/metrics")
	d.stop(t, os.Interrupt)

	for _, p := range checkExprs(exprs, exposed) {
		t.Error(p)
	}

	// The same check on copies with misspelt metrics and labels (of a
	// selector, a by list and a legend): it must name them, and nothing else.
	t.Run("bad_fixtures", func(t *testing.T) {
		bad := append(dashboardExprs(t, "testdata/dashboards-bad/squall.json"), alertExprs(t, "testdata/dashboards-bad/squall-alerts.yaml")...)
		got := checkExprs(bad, exposed)
		want := []string{
			`squall.json: panel "Spool depth": squall_spool_record: no role exposes this metric`,
			`squall.json: panel "Lag per partition": squall_engine_partition_lags: no role exposes this metric`,
			`squall-alerts.yaml: alert SquallSlowActions: squall_engine_stage_duration_seconds_bucket has no label "stag"`,
			`squall-alerts.yaml: alert SquallSpoolNearlyFull: squall_spool_max_byte: no role exposes this metric`,
			`squall.json: panel "Intake latency": no metric of "histogram_quantile(0.99, sum by (le, webhok) (rate(squall_intake_request_duration_seconds_bucket[$__rate_interval])))" has label "webhok"`,
			`squall.json: panel "Intake latency": legend "{{quantile}}": no metric of "histogram_quantile(0.5, sum by (le) (rate(squall_intake_request_duration_seconds_bucket[$__rate_interval])))" has label "quantile"`,
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestAlertRules checks that the alerts link to sections of
// docs/operations.md that exist, and that they cover the alerts the docs
// list: each metric named in "What to alert on" and in the masters' "Alert
// on:" is used by some alert. (TestDeploy checks each rule's for, severity
// and annotations.)
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := readAlertRules(t, alertRulesFile)
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	var used strings.Builder
	for _, r := range rules {
		used.WriteString(r.Expr + "\n")
		const docURL = "https://github.com/squallhq/squall/blob/main/docs/operations.md#"
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], docURL)
		if !ok || !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %q is not a section of docs/operations.md", r.Alert, r.Annotations["runbook_url"])
		}
	}
	// Every metric the docs tell to alert on has an alert.
	section := markdownSection(t, string(doc), "### What to alert on")
	for _, m := range regexp.MustCompile(`squall_[a-z_]+`).FindAllString(section, -1) {
		if !strings.Contains(used.String(), m) {
			t.Errorf("docs/operations.md says to alert on %s; no alert uses it", m)
		}
	}
	// And the masters' alerts of "Probes and metrics".
	master := markdownSection(t, string(doc), "## Probes and metrics")
	_, alertOn, ok := strings.Cut(master, "Alert on:")
	if !ok {
		t.Fatal(`docs/operations.md: no "Alert on:" in "Probes and metrics"`)
	}
	for _, m := range regexp.MustCompile(`squall_[a-z_]+`).FindAllString(alertOn, -1) {
		if !strings.Contains(used.String(), m) {
			t.Errorf("docs/operations.md says to alert on %s; no alert uses it", m)
		}
	}
}

// TestPromQLSelectors checks the extraction of metric names and selector
// labels from PromQL, on the forms the dashboard and the rules use and on
// the ones that must not be taken for a metric.
func TestPromQLSelectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		expr     string
		want     []string // name{label,...}
		grouping []string
	}{
		{"bare", `squall_engine_ready`, []string{"squall_engine_ready{}"}, nil},
		{"aggregation", `sum(squall_engine_ready) < 2`, []string{"squall_engine_ready{}"}, nil},
		{"by before", `sum by (reason) (increase(squall_engine_events_failed_total[10m])) > 0`, []string{"squall_engine_events_failed_total{}"}, []string{"reason"}},
		{"by after", `sum(rate(a_total[5m])) by (code, webhook)`, []string{"a_total{}"}, []string{"code", "webhook"}},
		{"matchers", `rate(x_total{code=~"5..", webhook!="a,b}"}[5m])`, []string{"x_total{code,webhook}"}, nil},
		{"histogram", `histogram_quantile(0.99, sum by (le, stage) (rate(h_bucket{stage="act"}[$__rate_interval])))`, []string{"h_bucket{stage}"}, []string{"le", "stage"}},
		{"grafana variables", `rate(x_total{instance=~"$instance"}[${__range}]) * $factor`, []string{"x_total{instance}"}, nil},
		{"binary operators", `a / on (instance) group_left (job) b or c unless d and bool e`, []string{"a{}", "b{}", "c{}", "d{}", "e{}"}, []string{"instance", "job"}},
		{"keywords and numbers", `a offset 5m > 1e3 + Inf - NaN + 0x1f + 1h30m + .5`, []string{"a{}"}, nil},
		{"scalar", `scalar(max(m1)) - m2 > 1024`, []string{"m1{}", "m2{}"}, nil},
		{"subquery", `max_over_time(deriv(sum(m)[10m:1m])[1h:])`, []string{"m{}"}, nil},
		{"name matcher", `{__name__="m", job="j"}`, []string{"m{job}"}, nil},
		{"topk", `topk(5, m) without (instance)`, []string{"m{}"}, []string{"instance"}},
		{"comment", "m # not_a_metric{x}\n+ n", []string{"m{}", "n{}"}, nil},
		{"at modifier", `m @ start()`, []string{"m{}"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sels, grouping, err := promqlSelectors(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range sels {
				got = append(got, s.name+"{"+strings.Join(s.labels, ",")+"}")
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(grouping, tc.grouping) {
				t.Errorf("%s\ngot  %q %q\nwant %q %q", tc.expr, got, grouping, tc.want, tc.grouping)
			}
		})
	}
	for _, bad := range []string{`m{job="x"`, `rate(m[5m)`, `m{"x"}`, `{job="j"}`, `m{job="unterminated}`} {
		if sels, _, err := promqlSelectors(bad); err == nil {
			t.Errorf("%s: no error, selectors %v", bad, sels)
		}
	}
}

// promExpr is one PromQL expression of the dashboard or the rules, with
// where it is.
type promExpr struct {
	where  string // file: panel "title" or alert Name
	expr   string
	legend string // a dashboard target's legendFormat
}

// dashboardExprs returns the expressions of every panel target of a
// Grafana dashboard, rows' nested panels included.
func dashboardExprs(t *testing.T, file string) []promExpr {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []promExpr
	for _, p := range dash.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, promExpr{fmt.Sprintf("%s: panel %q", filepath.Base(file), p.Title), tg.Expr, tg.LegendFormat})
		}
	}
	return out
}

// alertExprs returns the expressions of the rules of a rules file.
func alertExprs(t *testing.T, file string) []promExpr {
	t.Helper()
	var out []promExpr
	for _, r := range readAlertRules(t, file) {
		out = append(out, promExpr{fmt.Sprintf("%s: alert %s", filepath.Base(file), r.Alert), r.Expr, ""})
	}
	return out
}

// alertRule is one rule of a Prometheus rules file.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readAlertRules(t *testing.T, file string) []alertRule {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseAlertRules(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rules
}

// parseAlertRules decodes a Prometheus rules file, refusing unknown fields.
func parseAlertRules(b []byte) ([]alertRule, error) {
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("no rules")
	}
	return rules, nil
}

// grafanaDashboard is the part of a Grafana dashboard these tests read.
type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Datasource   *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // of a collapsed row
}

// allPanels returns the panels, those of collapsed rows included.
func (d *grafanaDashboard) allPanels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// exposedMetric is a series name of /metrics and its label names.
type exposedMetric map[string]bool

// scrapeMetrics reads url's text exposition and returns every series name
// (histograms as _bucket, _sum and _count, as Prometheus stores them) with
// the label names its series carry.
func scrapeMetrics(t *testing.T, url string) map[string]exposedMetric {
	t.Helper()
	code, body := apitest.Call(t.Context(), http.MethodGet, url, "", nil, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	families, err := parseExposition(string(body))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return families
}

func parseExposition(text string) (map[string]exposedMetric, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]exposedMetric{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = exposedMetric{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out, nil
}

// checkExprs returns a problem for every selector of exprs whose metric,
// or one of whose matcher labels, is not in exposed, and for every label
// of a by/without/on/ignoring/group_* list or of a legend that none of the
// expression's metrics has.
func checkExprs(exprs []promExpr, exposed map[string]exposedMetric) []string {
	var problems []string
	for _, e := range exprs {
		sels, grouping, err := promqlSelectors(e.expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", e.where, err))
			continue
		}
		if len(sels) == 0 {
			problems = append(problems, fmt.Sprintf("%s: %q selects no metric", e.where, e.expr))
		}
		// Labels Prometheus adds to every series.
		known := map[string]bool{"job": true, "instance": true}
		missing := false
		for _, s := range sels {
			labels, ok := exposed[s.name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: %s: no role exposes this metric", e.where, s.name))
				missing = true
				continue
			}
			for l := range labels {
				known[l] = true
			}
			for _, l := range s.labels {
				if !labels[l] && l != "job" && l != "instance" {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %q", e.where, s.name, l))
				}
			}
		}
		if missing {
			continue // its labels are unknown
		}
		for _, l := range grouping {
			if !known[l] {
				problems = append(problems, fmt.Sprintf("%s: no metric of %q has label %q", e.where, e.expr, l))
			}
		}
		for _, m := range legendLabel.FindAllStringSubmatch(e.legend, -1) {
			if !known[m[1]] {
				problems = append(problems, fmt.Sprintf("%s: legend %q: no metric of %q has label %q", e.where, e.legend, e.expr, m[1]))
			}
		}
	}
	return problems
}

// legendLabel is a label in a Grafana legend format: {{label}}.
var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// promSelector is a series selector of a PromQL expression: the metric
// name and the label names of its matchers.
type promSelector struct {
	name   string
	labels []string
}

// promqlWords are PromQL's identifiers that are no metric: aggregation
// operators (which may be followed by by/without rather than a
// parenthesis), binary operators, modifiers and number literals.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// promqlLabelLists are the keywords followed by a parenthesized list of
// label names.
var promqlLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promqlSelectors returns the series selectors of a PromQL expression (with
// Grafana's $variables), in order, and the labels of its by, without, on,
// ignoring and group_* lists. It is a tokenizer, not a parser: it skips
// strings, comments, numbers and durations, range and subquery brackets,
// and identifiers followed by a parenthesis (functions); what remains names
// a metric.
func promqlSelectors(expr string) (sels []promSelector, grouping []string, err error) {
	var out []promSelector
	i, n := 0, len(expr)
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func() {
		for i < n && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
	}
	ident := func() string {
		start := i
		for i < n && isIdent(expr[i]) {
			i++
		}
		return expr[start:i]
	}
	skipString := func() error {
		q := expr[i]
		for i++; i < n; i++ {
			switch {
			case expr[i] == '\\' && q != '`':
				i++
			case expr[i] == q:
				i++
				return nil
			}
		}
		return fmt.Errorf("%q: unterminated string", expr)
	}
	// matchers reads {label op "value", ...} and returns the label names.
	matchers := func() ([]string, string, error) {
		var labels []string
		name := ""
		i++ // {
		for {
			skipSpace()
			if i < n && expr[i] == '}' {
				i++
				return labels, name, nil
			}
			if i >= n || !isIdentStart(expr[i]) {
				return nil, "", fmt.Errorf("%q: want a label name at offset %d", expr, i)
			}
			l := ident()
			skipSpace()
			op := ""
			for _, o := range []string{"=~", "!~", "!=", "="} {
				if strings.HasPrefix(expr[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, "", fmt.Errorf("%q: want a matcher after label %s", expr, l)
			}
			i += len(op)
			skipSpace()
			if i >= n || strings.IndexByte("\"'`", expr[i]) < 0 {
				return nil, "", fmt.Errorf("%q: want a quoted value for label %s", expr, l)
			}
			start := i
			if err := skipString(); err != nil {
				return nil, "", err
			}
			if l == "__name__" && op == "=" {
				name = expr[start+1 : i-1]
			} else {
				labels = append(labels, l)
			}
			skipSpace()
			if i < n && expr[i] == ',' {
				i++
			}
		}
	}
	for {
		skipSpace()
		if i >= n {
			return out, grouping, nil
		}
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := skipString(); err != nil {
				return nil, nil, err
			}
		case c == '#':
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, nil, fmt.Errorf("%q: unterminated [", expr)
			}
			i += end + 1
		case c == '$': // Grafana: $name, ${name}, $__interval
			i++
			if i < n && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, nil, fmt.Errorf("%q: unterminated ${", expr)
				}
				i += end + 1
			} else {
				ident()
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && expr[i+1] >= '0' && expr[i+1] <= '9':
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '{':
			labels, name, err := matchers()
			if err != nil {
				return nil, nil, err
			}
			if name == "" {
				return nil, nil, fmt.Errorf("%q: a selector without a metric name", expr)
			}
			out = append(out, promSelector{name: name, labels: labels})
		case isIdentStart(c):
			word := ident()
			skipSpace()
			next := byte(0)
			if i < n {
				next = expr[i]
			}
			lower := strings.ToLower(word)
			switch {
			case promqlLabelLists[lower] && next == '(':
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return nil, nil, fmt.Errorf("%q: unterminated %s (", expr, word)
				}
				for l := range strings.SplitSeq(expr[i+1:i+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						grouping = append(grouping, l)
					}
				}
				i += end + 1
			case promqlWords[lower] || next == '(':
				// an operator, a keyword or a function
			default:
				sel := promSelector{name: word}
				if next == '{' {
					labels, name, err := matchers()
					if err != nil {
						return nil, nil, err
					}
					if name != "" {
						return nil, nil, fmt.Errorf("%q: metric %s also has a __name__ matcher", expr, word)
					}
					sel.labels = labels
				}
				out = append(out, sel)
			}
		default:
			i++ // an operator or punctuation
		}
	}
}

// mdHeading is a heading of a Markdown document.
type mdHeading struct {
	level      int
	title      string
	start, end int // offsets of its line and of its section's end
}

// markdownHeadings returns the headings of a Markdown document, outside
// fenced code blocks, each with the end of its section (the next heading
// of the same or a higher level).
func markdownHeadings(doc string) []mdHeading {
	var hs []mdHeading
	fenced := false
	off := 0
	for line := range strings.Lines(doc) {
		start := off
		off += len(line)
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		for i := len(hs) - 1; i >= 0 && hs[i].end < 0; i-- {
			if hs[i].level >= level {
				hs[i].end = start
			}
		}
		hs = append(hs, mdHeading{level: level, title: strings.TrimSpace(line[level:]), start: start, end: -1})
	}
	for i := range hs {
		if hs[i].end < 0 {
			hs[i].end = len(doc)
		}
	}
	return hs
}

// markdownAnchors returns the GitHub anchors of a Markdown document's
// headings.
func markdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	for _, h := range markdownHeadings(doc) {
		var b strings.Builder
		for _, r := range strings.ToLower(h.title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// markdownSection returns the text of the section under heading ("## Title").
func markdownSection(t *testing.T, doc, heading string) string {
	t.Helper()
	for _, h := range markdownHeadings(doc) {
		if strings.Repeat("#", h.level)+" "+h.title == heading {
			return doc[h.start:h.end]
		}
	}
	t.Fatalf("docs/operations.md has no %q", heading)
	return ""
}

// dashboard checks a Grafana dashboard of deploy/grafana: importable (uid,
// title, schema version, unique panel ids, a grid position), and every
// panel queries the Prometheus chosen in the ${datasource} variable.
func (r *deployReport) dashboard(where string, b []byte) {
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		r.problem(where, "%v", err)
		return
	}
	r.seen[where+":dashboard"] = true
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		r.problem(where, "want uid, title and schemaVersion")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query string `json:"query"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		r.problem(where, "no datasource variable of type datasource for prometheus")
	}
	ids := map[int]bool{}
	targets := 0
	for _, p := range d.allPanels() {
		name := fmt.Sprintf("panel %q", p.Title)
		if ids[p.ID] || p.ID == 0 {
			r.problem(where, "%s: id %d is missing or not unique", name, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			r.problem(where, "%s: want a gridPos within the 24 columns", name)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			uid := ""
			if p.Datasource != nil {
				uid = p.Datasource.UID
			}
			r.problem(where, "%s: datasource uid %q, want ${datasource}", name, uid)
		}
		if len(p.Targets) == 0 {
			r.problem(where, "%s: no targets", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			targets++
			if tg.RefID == "" || refs[tg.RefID] {
				r.problem(where, "%s: refId %q is missing or not unique", name, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				r.problem(where, "%s: target %s has no expr", name, tg.RefID)
			} else if _, _, err := promqlSelectors(tg.Expr); err != nil {
				r.problem(where, "%s: %v", name, err)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				r.problem(where, "%s: target %s: datasource uid %q, want ${datasource}", name, tg.RefID, tg.Datasource.UID)
			}
		}
	}
	if targets == 0 {
		r.problem(where, "no panel queries anything")
	}
}

// alertRules checks a Prometheus rules file of deploy/prometheus: every
// alert has a unique name, a `for`, a severity and annotations that say
// what to do (promtool in .ci/run checks the expressions themselves, and
// TestDashboardMetrics their metrics).
func (r *deployReport) alertRules(where string, b []byte) {
	rules, err := parseAlertRules(b)
	if err != nil {
		r.problem(where, "%v", err)
		return
	}
	r.seen[where+":rules"] = true
	names := map[string]bool{}
	for _, rule := range rules {
		if rule.Alert == "" {
			r.problem(where, "rule %q: not an alert", rule.Expr)
			continue
		}
		name := "alert " + rule.Alert
		if names[rule.Alert] {
			r.problem(where, "%s: defined twice", name)
		}
		names[rule.Alert] = true
		if rule.For == "" {
			r.problem(where, "%s: no for", name)
		}
		if s := rule.Labels["severity"]; s != "critical" && s != "warning" {
			r.problem(where, "%s: severity %q, want critical or warning", name, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(rule.Annotations[a]) == "" {
				r.problem(where, "%s: no %s annotation", name, a)
			}
		}
		if _, _, err := promqlSelectors(rule.Expr); err != nil {
			r.problem(where, "%s: %v", name, err)
		}
	}
}

// ruleTests checks a promtool unit-test file: it tests the rules file
// beside it (its name without _test), with at least one test.
func (r *deployReport) ruleTests(where string, b []byte) {
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []any    `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		r.problem(where, "%v", err)
		return
	}
	r.seen[where+":promtool"] = true
	want := []string{strings.TrimSuffix(path.Base(where), "_test.yaml") + ".yaml"}
	if !slices.Equal(f.RuleFiles, want) {
		r.problem(where, "rule_files %v, want %v", f.RuleFiles, want)
	}
	if len(f.Tests) == 0 {
		r.problem(where, "no tests")
	}
}
