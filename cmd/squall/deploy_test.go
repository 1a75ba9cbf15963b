package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/webhooks"
)

// The deployment files under deploy/ run the binary with flags and
// SQUALL_* variables. TestDeploy reads every one of them and checks each
// command, flag and variable against `squall <command> --help` of the real
// binary, so that they cannot drift from it; it also checks that the YAML
// parses, that the Kubernetes objects and compose services have what they
// need, and that the example webhook and action files load.

// TestDeploy checks the files of deploy/.
func TestDeploy(t *testing.T) {
	t.Parallel()
	help := squallHelp(t)
	r := checkDeploy("../../deploy", help)
	for _, p := range r.problems {
		t.Error(p)
	}
	// Guard against a checker that silently reads nothing: every kind of
	// file must have yielded the invocations it holds.
	for _, want := range []string{
		"Dockerfile:squall", // ENTRYPOINT
		"compose.yaml:master", "compose.yaml:satellite", "compose.yaml:engine",
		"k8s/master.yaml:master", "k8s/satellite.yaml:satellite", "k8s/engine.yaml:engine",
		"systemd/squall-master.service:master", "systemd/squall-satellite.service:satellite", "systemd/squall-engine.service:engine",
		"README.md:token", "README.md:version", "compose.yaml:token",
		"grafana/squall.json:dashboard", "prometheus/squall-alerts.yaml:rules", "prometheus/squall-alerts_test.yaml:promtool",
	} {
		if !r.seen[want] {
			t.Errorf("no squall invocation found for %s; seen: %v", want, r.seenList())
		}
	}
	if r.flags < 10 || r.vars < 30 {
		t.Errorf("checked only %d flags and %d variables", r.flags, r.vars)
	}
	if r.webhooks < 4 || r.actions < 2 {
		t.Errorf("loaded only %d example webhooks and %d action configs", r.webhooks, r.actions)
	}
}

// TestDeploy_BadFixtures runs the checker on deliberately broken copies of
// deployment files: each must be reported, and nothing else.
func TestDeploy_BadFixtures(t *testing.T) {
	t.Parallel()
	help := squallHelp(t)
	tests := []struct {
		name string
		want []string // substrings, one per expected problem
	}{
		{"compose_misspelt_flag", []string{"compose.yaml: service satellite: squall satellite has no flag --kafka-broker"}},
		{"compose_misspelt_env", []string{
			"compose.yaml: service engine: squall engine reads no SQUALL_KAFKA_BROKER",
			"compose.yaml: service engine: squall engine: --kafka-brokers (or SQUALL_KAFKA_BROKERS) is required",
		}},
		{"compose_missing_secret", []string{"compose.yaml: service master: secret join_token is not declared"}},
		{"k8s_misspelt_flag", []string{
			"k8s/engine.yaml: Deployment squall-engine container engine: squall engine has no flag --masters",
			"k8s/engine.yaml: Deployment squall-engine container engine: squall engine: --master (or SQUALL_MASTER) is required",
		}},
		{"k8s_env_of_other_command", []string{"k8s/satellite.yaml: Deployment squall-satellite container satellite: squall satellite reads no SQUALL_NODE_ID"}},
		{"k8s_unknown_reference", []string{"$(POD_NAME) refers to no earlier variable"}},
		{"k8s_no_readiness", []string{"readinessProbe: want httpGet /readyz"}},
		{"k8s_writable_root", []string{"readOnlyRootFilesystem is not true"}},
		{"systemd_misspelt_env", []string{
			"systemd/master.env: squall master reads no SQUALL_NODEID",
			"systemd/squall-master.service: squall master: --node-id (or SQUALL_NODE_ID) is required",
		}},
		{"systemd_unknown_command", []string{"systemd/squall-master.service: ExecStart: squall has no command mastr"}},
		{"systemd_short_timeout", []string{"TimeoutStopSec 5s is not longer than SQUALL_SHUTDOWN_TIMEOUT 10s"}},
		{"systemd_orphan_env", []string{"systemd/extra.env: no unit or service reads this file"}},
		{"readme_misspelt_flag", []string{
			"README.md: squall token has no flag --usr",
			`README.md: squall token: invalid argument "8x" for "--ttl" flag`,
		}},
		{"compose_missing_required", []string{"compose.yaml: service engine: squall engine: --token-file (or SQUALL_TOKEN_FILE) is required"}},
		{"compose_comment_misspelt", []string{"compose.yaml: squall token has no flag --hmac-key-fil"}},
		{"compose_bad_value", []string{`compose.yaml: service satellite: squall satellite: invalid argument "1G" for "--spool-max-bytes"`}},
		{"systemd_bad_value", []string{`systemd/master.env: squall master: environment variable SQUALL_BOOTSTRAP="yes" (flag --bootstrap)`}},
		{"k8s_service_selects_nothing", []string{"k8s/satellite.yaml: Service squall-satellite: want spec.ports and a spec.selector that picks the pods"}},
		{"dockerfile_root", []string{"Dockerfile: the final stage runs as root"}},
		{"bad_webhook", []string{"examples/webhooks/a/broken.json"}},
		{"grafana_fixed_datasource", []string{`grafana/squall.json: panel "Spool depth": datasource uid "P1809F7CD0C75ACF3", want ${datasource}`}},
		{"grafana_no_variable", []string{"grafana/squall.json: no datasource variable of type datasource for prometheus"}},
		{"prometheus_rule_without_for", []string{
			"prometheus/squall-alerts.yaml: alert SquallSpoolFull: no for",
			"prometheus/squall-alerts.yaml: alert SquallSpoolFull: severity \"page\", want critical or warning",
		}},
		{"prometheus_tests_other_file", []string{"prometheus/squall-alerts_test.yaml: rule_files [other.yaml], want [squall-alerts.yaml]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := checkDeploy(filepath.Join("testdata", "deploy-bad", tc.name), help)
			if len(r.problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(r.problems), len(tc.want), strings.Join(r.problems, "\n"))
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, w) }) {
					t.Errorf("no problem contains %q:\n%s", w, strings.Join(r.problems, "\n"))
				}
			}
		})
	}
}

// commandHelp is what `squall <command> --help` documents.
type commandHelp struct {
	flags map[string]bool // long names, without "--"
	env   map[string]bool // SQUALL_* variables
}

var (
	helpOnce sync.Once
	helpIdx  map[string]commandHelp
	helpErr  error
)

// squallHelp runs the real binary's --help for every command, once per
// test process.
func squallHelp(t *testing.T) map[string]commandHelp {
	t.Helper()
	bin := squallBinary(t)
	helpOnce.Do(func() { helpIdx, helpErr = readHelp(bin) })
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	return helpIdx
}

func readHelp(bin string) (map[string]commandHelp, error) {
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		return nil, fmt.Errorf("squall --help: %w", err)
	}
	idx := map[string]commandHelp{}
	for _, name := range helpSection(string(out), "Available Commands:") {
		name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
		out, err := exec.Command(bin, name, "--help").Output()
		if err != nil {
			return nil, fmt.Errorf("squall %s --help: %w", name, err)
		}
		h := commandHelp{flags: map[string]bool{}, env: map[string]bool{}}
		for _, line := range helpSection(string(out), "Flags:") {
			if m := helpFlag.FindStringSubmatch(line); m != nil {
				h.flags[m[1]] = true
			}
			for _, m := range helpEnv.FindAllStringSubmatch(line, -1) {
				h.env[m[1]] = true
			}
		}
		idx[name] = h
	}
	if len(idx) < 5 {
		return nil, fmt.Errorf("squall --help lists only %d commands:\n%s", len(idx), out)
	}
	return idx, nil
}

var (
	helpFlag = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)
	helpEnv  = regexp.MustCompile(`\[(SQUALL_[A-Z0-9_]+)\]`)
)

// helpSection returns the lines after the heading up to the next blank line.
func helpSection(out, heading string) []string {
	var lines []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.TrimSpace(line) == heading:
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			lines = append(lines, line)
		}
	}
	return lines
}

// deployReport is what checkDeploy found.
type deployReport struct {
	help     map[string]commandHelp
	root     string
	problems []string
	seen     map[string]bool // "file:command" of every invocation
	flags    int             // flags checked
	vars     int             // variables checked
	webhooks int             // example webhook files loaded
	actions  int             // action configurations loaded
	envFiles map[string]bool // env files some unit or service reads
}

func (r *deployReport) problem(where, format string, args ...any) {
	r.problems = append(r.problems, where+": "+fmt.Sprintf(format, args...))
}

func (r *deployReport) seenList() []string {
	var l []string
	for k := range r.seen {
		l = append(l, k)
	}
	slices.Sort(l)
	return l
}

// invocation checks one run of the binary: args start with the command
// (none when the file names none, as a bare ENTRYPOINT), env holds the
// variables it sets; only SQUALL_* ones are checked. Names are checked
// against the binary's --help; values by parsing them with the command's
// own flags, in-process.
func (r *deployReport) invocation(file, where string, args []string, env map[string]string) {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	r.seen[file+":"+cmp.Or(cmd, "squall")] = true
	if cmd == "" || strings.HasPrefix(cmd, "-") {
		return
	}
	h, ok := r.help[cmd]
	if !ok {
		r.problem(where, "squall has no command %s", cmd)
		return
	}
	for _, a := range args[1:] {
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			r.flags++
			if !h.flags[name] {
				r.problem(where, "squall %s has no flag --%s", cmd, name)
			}
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.ContainsAny(a[1:2], "0123456789"):
			r.problem(where, "squall %s: %q: long flags take two dashes", cmd, a)
		}
	}
	squallEnv := map[string]string{}
	for _, v := range slices.Sorted(maps.Keys(env)) {
		if !strings.HasPrefix(v, envPrefix) {
			continue
		}
		r.vars++
		if !h.env[v] {
			r.problem(where, "squall %s reads no %s", cmd, v)
			continue
		}
		squallEnv[v] = env[v]
	}
	if _, errs := parseInvocation(args, squallEnv); len(errs) > 0 {
		for _, err := range errs {
			r.problem(where, "squall %s: %v", cmd, err)
		}
	}
}

// required checks that a complete invocation (its arguments and every
// variable it gets) sets the flags its command requires.
func (r *deployReport) required(where string, args []string, env map[string]string) {
	c, errs := parseInvocation(args, env)
	if c == nil || len(errs) > 0 {
		return // reported by invocation
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if requiredFlag.MatchString(f.Usage) && !f.Changed {
			r.problem(where, "squall %s: --%s (or %s) is required", c.Name(), f.Name, envName(f.Name))
		}
	})
}

// parseInvocation parses the flags and the variables of an invocation with
// a fresh copy of its command, as the binary would: a value the flag
// refuses (a duration without a unit, a number that is not) is an error.
// Unknown commands give a nil command and unknown flags are skipped: the
// check against --help reports them.
func parseInvocation(args []string, env map[string]string) (*cobra.Command, []error) {
	if len(args) == 0 {
		return nil, nil
	}
	c, rest, err := newRootCommand(strings.NewReader(""), io.Discard, io.Discard).Find(args)
	if err != nil || c.Name() != args[0] {
		return nil, nil
	}
	// Flags this test does not know are reported above; parse the rest.
	var known []string
	for i := 0; i < len(rest); i++ {
		name, _, _ := strings.Cut(strings.TrimPrefix(rest[i], "--"), "=")
		if strings.HasPrefix(rest[i], "--") && c.Flags().Lookup(name) == nil {
			if !strings.Contains(rest[i], "=") && i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") {
				i++ // its value
			}
			continue
		}
		known = append(known, rest[i])
	}
	var errs []error
	if err := c.ParseFlags(known); err != nil {
		errs = append(errs, err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := bindEnv(c, lookup); err != nil {
		errs = append(errs, err)
	}
	return c, errs
}

// checkDeploy reads every file under root.
func checkDeploy(root string, help map[string]commandHelp) *deployReport {
	r := &deployReport{help: help, root: root, seen: map[string]bool{}, envFiles: map[string]bool{}}
	var envFiles []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if d.IsDir() {
			if rel == "secrets" || rel == "k8s/secrets" { // created by the operator, ignored by git
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		base := path.Base(rel)
		switch {
		case base == "Dockerfile":
			r.dockerfile(rel, b)
		case base == "compose.yaml":
			r.compose(rel, b)
		case strings.HasPrefix(rel, "k8s/") && base == "kustomization.yaml":
			r.kustomization(rel, b)
		case strings.HasPrefix(rel, "k8s/") && strings.HasSuffix(base, ".yaml"):
			r.kubernetes(rel, b)
		case strings.HasSuffix(base, ".service"):
			r.unit(rel, b)
		case strings.HasSuffix(base, ".env"):
			envFiles = append(envFiles, rel)
		case base == "README.md":
			r.readme(rel, b)
		case strings.HasPrefix(rel, "examples/webhooks/") && strings.HasSuffix(base, ".json"):
			// Loaded per folder below.
		case strings.HasPrefix(rel, "examples/") && base == "actions.json":
			r.actionsConfig(rel, b)
		case strings.HasPrefix(rel, "grafana/") && strings.HasSuffix(base, ".json"):
			r.dashboard(rel, b)
		case strings.HasPrefix(rel, "prometheus/") && strings.HasSuffix(base, "_test.yaml"):
			r.ruleTests(rel, b)
		case strings.HasPrefix(rel, "prometheus/") && strings.HasSuffix(base, ".yaml"):
			r.alertRules(rel, b)
		case strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"):
			r.problem(rel, "a YAML file this test does not know how to check")
		}
		return nil
	})
	if err != nil {
		r.problem(root, "%v", err)
	}
	for _, f := range envFiles {
		if !r.envFiles[f] {
			r.problem(f, "no unit or service reads this file")
		}
	}
	r.exampleWebhooks()
	slices.Sort(r.problems)
	return r
}

// exampleWebhooks loads every folder of examples/webhooks as a satellite
// would.
func (r *deployReport) exampleWebhooks() {
	dirs, err := os.ReadDir(filepath.Join(r.root, "examples", "webhooks"))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		r.problem("examples/webhooks", "%v", err)
		return
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		set, problems, err := webhooks.LoadDir(filepath.Join(r.root, "examples", "webhooks", d.Name()))
		if err != nil {
			r.problem("examples/webhooks/"+d.Name(), "%v", err)
		}
		for _, p := range problems {
			r.problem("examples/webhooks/"+d.Name()+"/"+p.Name, "%v", p.Err)
		}
		r.webhooks += len(set)
	}
}

func (r *deployReport) actionsConfig(where string, b []byte) {
	cfg, err := action.Parse(bytes.NewReader(b))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		r.problem(where, "%v", err)
		return
	}
	r.actions++
}

// dockerfile checks the final stage: a non-root USER and an exec-form
// ENTRYPOINT running /squall; CMD, if any, is an invocation.
func (r *deployReport) dockerfile(file string, b []byte) {
	var user string
	var entrypoint, command []string
	stages := 0
	for _, ins := range dockerInstructions(b) {
		word, rest, _ := strings.Cut(ins, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			stages++
			user, entrypoint, command = "", nil, nil
			if strings.Contains(rest, ":nonroot") {
				user = "nonroot"
			}
		case "USER":
			user = rest
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(rest), &list); err != nil {
				r.problem(file, "%s %s: want the exec form, a JSON array", word, rest)
				continue
			}
			if strings.ToUpper(word) == "ENTRYPOINT" {
				entrypoint = list
			} else {
				command = list
			}
		}
	}
	if stages < 2 {
		r.problem(file, "want a multi-stage build")
	}
	u, _, _ := strings.Cut(user, ":")
	if u == "" || u == "root" || u == "0" {
		r.problem(file, "the final stage runs as root: want a non-root USER")
	}
	if len(entrypoint) != 1 || path.Base(entrypoint[0]) != "squall" {
		r.problem(file, "ENTRYPOINT %q: want [\"/squall\"]", entrypoint)
		return
	}
	r.seen[file+":squall"] = true
	r.invocation(file, file+": CMD", command, nil)
}

// dockerInstructions returns the instructions of a Dockerfile, comments
// dropped and continuation lines joined.
func dockerInstructions(b []byte) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// compose checks a compose file: every squall service's command and
// environment, and that what services refer to is declared.
func (r *deployReport) compose(file string, b []byte) {
	r.comments(file, b)
	var doc struct {
		Services map[string]map[string]any `yaml:"services"`
		Secrets  map[string]map[string]any `yaml:"secrets"`
		Configs  map[string]map[string]any `yaml:"configs"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		r.problem(file, "%v", err)
		return
	}
	if len(doc.Services) == 0 {
		r.problem(file, "no services")
	}
	for _, kind := range []struct {
		name string
		m    map[string]map[string]any
	}{{"secret", doc.Secrets}, {"config", doc.Configs}} {
		for name, def := range kind.m {
			f, _ := def["file"].(string)
			if f == "" {
				r.problem(file, "%s %s: want a file", kind.name, name)
			} else if !strings.HasPrefix(path.Clean(f), "secrets/") {
				r.mustExist(file+": "+kind.name+" "+name, path.Dir(file), f)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
		svc := doc.Services[name]
		where := file + ": service " + name
		image, _ := svc["image"].(string)
		if image == "" && svc["build"] == nil {
			r.problem(where, "no image and no build")
		}
		for _, dep := range keysOrList(svc["depends_on"]) {
			if _, ok := doc.Services[dep]; !ok {
				r.problem(where, "depends on unknown service %s", dep)
			}
		}
		for _, s := range refNames(svc["secrets"]) {
			if _, ok := doc.Secrets[s]; !ok {
				r.problem(where, "secret %s is not declared", s)
			}
		}
		for _, c := range refNames(svc["configs"]) {
			if _, ok := doc.Configs[c]; !ok {
				r.problem(where, "config %s is not declared", c)
			}
		}
		for _, v := range stringList(svc["volumes"]) {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				r.mustExist(where, path.Dir(file), src)
			} else if _, ok := doc.Volumes[src]; !ok {
				r.problem(where, "volume %s is not declared", src)
			}
		}
		if !strings.HasPrefix(image, "squall") {
			continue
		}
		var args []string
		switch c := svc["command"].(type) {
		case string:
			args = strings.Fields(c)
		default:
			args = stringList(c)
		}
		env := map[string]string{}
		switch e := svc["environment"].(type) {
		case map[string]any:
			for k, v := range e {
				env[k] = fmt.Sprint(v)
			}
		default:
			for _, kv := range stringList(e) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
		r.invocation(file, where, args, env)
		for _, f := range stringList(svc["env_file"]) {
			name := path.Join(path.Dir(file), f)
			b, err := os.ReadFile(filepath.Join(r.root, name))
			if err != nil {
				r.problem(where, "env_file %s: %v", f, err)
				continue
			}
			r.envFiles[name] = true
			r.invocation(name, name, args[:min(len(args), 1)], envFileVars(b, true))
			for k, v := range envFileVars(b, false) {
				if _, set := env[k]; !set {
					env[k] = v
				}
			}
		}
		r.required(where, args, env)
		grace, _ := svc["stop_grace_period"].(string)
		r.checkGrace(where, "stop_grace_period", grace, env["SQUALL_SHUTDOWN_TIMEOUT"])
	}
}

// checkGrace checks that a stop grace period is longer than the shutdown
// timeout the process is given ("" when it is not set there).
func (r *deployReport) checkGrace(where, name, grace, shutdown string) {
	if shutdown == "" {
		return
	}
	s, err := time.ParseDuration(shutdown)
	if err != nil {
		r.problem(where, "SQUALL_SHUTDOWN_TIMEOUT %q: %v", shutdown, err)
		return
	}
	g, err := time.ParseDuration(grace)
	if err != nil {
		r.problem(where, "%s %q: want a duration longer than SQUALL_SHUTDOWN_TIMEOUT %s", name, grace, shutdown)
		return
	}
	if g <= s {
		r.problem(where, "%s %s is not longer than SQUALL_SHUTDOWN_TIMEOUT %s", name, grace, shutdown)
	}
}

func (r *deployReport) mustExist(where, dir, name string) {
	if _, err := os.Stat(filepath.Join(r.root, dir, name)); err != nil {
		r.problem(where, "%s does not exist", name)
	}
}

// stringList returns a YAML list of scalars as strings.
func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if _, ok := x.(map[string]any); ok {
			continue
		}
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// keysOrList returns the keys of a YAML mapping or the items of a list.
func keysOrList(v any) []string {
	if m, ok := v.(map[string]any); ok {
		return slices.Sorted(maps.Keys(m))
	}
	return stringList(v)
}

// refNames returns the names of compose secret or config references, in
// short ("name") or long ({source: name}) form.
func refNames(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		switch x := x.(type) {
		case string:
			out = append(out, x)
		case map[string]any:
			s, _ := x["source"].(string)
			out = append(out, s)
		}
	}
	return out
}

// kustomization checks that the resources it lists exist and records the
// secrets and config maps it generates.
func (r *deployReport) kustomization(file string, b []byte) {
	r.comments(file, b)
	var k struct {
		Resources       []string `yaml:"resources"`
		SecretGenerator []struct {
			Name  string   `yaml:"name"`
			Files []string `yaml:"files"`
		} `yaml:"secretGenerator"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		r.problem(file, "%v", err)
		return
	}
	for _, res := range k.Resources {
		r.mustExist(file, path.Dir(file), res)
	}
	for _, g := range k.SecretGenerator {
		if g.Name == "" || len(g.Files) == 0 {
			r.problem(file, "secretGenerator %q: want a name and files", g.Name)
		}
	}
}

// kubernetes checks one manifest file of k8s/.
func (r *deployReport) kubernetes(file string, b []byte) {
	r.comments(file, b)
	objs, err := yamlDocuments(b)
	if err != nil {
		r.problem(file, "%v", err)
		return
	}
	defined := r.k8sDefinitions(file)
	services := map[string]map[string]any{}
	var podLabels []map[string]any // of every workload of the file
	for _, o := range objs {
		switch str(o, "kind") {
		case "Service":
			services[str(o, "metadata", "name")] = o
		case "StatefulSet", "Deployment":
			podLabels = append(podLabels, mapping(o, "spec", "template", "metadata", "labels"))
		}
	}
	// selects reports whether a selector picks the pods of a workload.
	selects := func(sel map[string]any) bool {
		return len(sel) > 0 && slices.ContainsFunc(podLabels, func(labels map[string]any) bool {
			for k, v := range sel {
				if labels[k] != v {
					return false
				}
			}
			return true
		})
	}
	for _, o := range objs {
		kind, name := str(o, "kind"), str(o, "metadata", "name")
		where := file + ": " + kind + " " + name
		if str(o, "apiVersion") == "" || kind == "" || name == "" {
			r.problem(file, "an object without apiVersion, kind or metadata.name")
			continue
		}
		switch kind {
		case "Service":
			if len(list(o, "spec", "ports")) == 0 || !selects(mapping(o, "spec", "selector")) {
				r.problem(where, "want spec.ports and a spec.selector that picks the pods of a workload of the same file")
			}
		case "ConfigMap":
			r.configMap(where, mapping(o, "data"))
		case "PodDisruptionBudget":
			if get(o, "spec", "maxUnavailable") == nil && get(o, "spec", "minAvailable") == nil {
				r.problem(where, "want spec.maxUnavailable or spec.minAvailable")
			}
			if !selects(mapping(o, "spec", "selector", "matchLabels")) {
				r.problem(where, "want spec.selector.matchLabels that picks the pods of a workload of the same file")
			}
		case "StatefulSet", "Deployment":
			if kind == "StatefulSet" {
				svc := services[str(o, "spec", "serviceName")]
				if svc == nil || str(svc, "spec", "clusterIP") != "None" {
					r.problem(where, "spec.serviceName %q: want a headless Service of the same file", str(o, "spec", "serviceName"))
				}
				if len(list(o, "spec", "volumeClaimTemplates")) == 0 {
					r.problem(where, "want spec.volumeClaimTemplates")
				}
			}
			sel, labels := mapping(o, "spec", "selector", "matchLabels"), mapping(o, "spec", "template", "metadata", "labels")
			if len(sel) == 0 {
				r.problem(where, "want spec.selector.matchLabels")
			}
			for k, v := range sel {
				if labels[k] != v {
					r.problem(where, "selector %s=%v does not match the pod template's labels", k, v)
				}
			}
			r.podSpec(file, where, o, defined)
		}
	}
}

// k8sDefinitions returns the config maps and secrets that the files of the
// manifest's folder define or generate.
func (r *deployReport) k8sDefinitions(file string) map[string]bool {
	defined := map[string]bool{}
	dir := filepath.Join(r.root, path.Dir(file))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		objs, _ := yamlDocuments(b)
		for _, o := range objs {
			switch str(o, "kind") {
			case "ConfigMap", "Secret":
				defined[str(o, "kind")+"/"+str(o, "metadata", "name")] = true
			case "Kustomization":
				for _, g := range list(o, "secretGenerator") {
					defined["Secret/"+str(g, "name")] = true
				}
				for _, g := range list(o, "configMapGenerator") {
					defined["ConfigMap/"+str(g, "name")] = true
				}
			}
		}
	}
	return defined
}

// configMap checks the webhook and action files a config map carries.
func (r *deployReport) configMap(where string, data map[string]any) {
	if len(data) == 0 {
		r.problem(where, "no data")
	}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		v := fmt.Sprint(data[key])
		switch {
		case key == "actions.json":
			r.actionsConfig(where+" "+key, []byte(v))
		case strings.HasSuffix(key, ".json"):
			if _, err := webhooks.Parse(strings.NewReader(v)); err != nil {
				r.problem(where+" "+key, "%v", err)
			} else {
				r.webhooks++
			}
		}
	}
}

// podSpec checks the pod template of a workload.
func (r *deployReport) podSpec(file, where string, o map[string]any, defined map[string]bool) {
	spec := mapping(o, "spec", "template", "spec")
	if get(spec, "securityContext", "runAsNonRoot") != true {
		r.problem(where, "securityContext.runAsNonRoot is not true")
	}
	volumes := map[string]bool{}
	for _, v := range list(spec, "volumes") {
		volumes[str(v, "name")] = true
		if n := str(v, "configMap", "name"); n != "" && !defined["ConfigMap/"+n] {
			r.problem(where, "volume %s: no ConfigMap %s", str(v, "name"), n)
		}
		if n := str(v, "secret", "secretName"); n != "" && !defined["Secret/"+n] {
			r.problem(where, "volume %s: no Secret %s", str(v, "name"), n)
		}
	}
	for _, c := range list(o, "spec", "volumeClaimTemplates") {
		volumes[str(c, "metadata", "name")] = true
	}
	for _, c := range list(spec, "containers") {
		cw := where + " container " + str(c, "name")
		if !strings.HasPrefix(str(c, "image"), "squall") {
			continue
		}
		sc := mapping(c, "securityContext")
		if sc["readOnlyRootFilesystem"] != true {
			r.problem(cw, "readOnlyRootFilesystem is not true")
		}
		if sc["allowPrivilegeEscalation"] != false {
			r.problem(cw, "allowPrivilegeEscalation is not false")
		}
		ports := map[string]bool{}
		for _, p := range list(c, "ports") {
			ports[str(p, "name")] = true
			ports[fmt.Sprint(get(p, "containerPort"))] = true
		}
		for probe, want := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
			if str(c, probe, "httpGet", "path") != want {
				r.problem(cw, "%s: want httpGet %s", probe, want)
			} else if port := fmt.Sprint(get(c, probe, "httpGet", "port")); !ports[port] {
				r.problem(cw, "%s: port %s is not a port of the container", probe, port)
			}
		}
		for _, m := range list(c, "volumeMounts") {
			if !volumes[str(m, "name")] {
				r.problem(cw, "volume mount %s: no such volume", str(m, "name"))
			}
		}
		// Kubernetes expands $(NAME) in env values and args from the
		// variables defined before; an unknown one stays as written.
		env := map[string]string{}
		known := map[string]bool{}
		refs := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
		checkRefs := func(s string) {
			for _, m := range refs.FindAllStringSubmatch(s, -1) {
				if !known[m[1]] {
					r.problem(cw, "$(%s) refers to no earlier variable", m[1])
				}
			}
		}
		for _, e := range list(c, "env") {
			checkRefs(str(e, "value"))
			known[str(e, "name")] = true
			env[str(e, "name")] = str(e, "value")
		}
		args := stringList(get(c, "args"))
		for _, a := range args {
			checkRefs(a)
		}
		if cmd := stringList(get(c, "command")); len(cmd) > 0 && path.Base(cmd[0]) != "squall" {
			r.problem(cw, "command %q does not run /squall", cmd)
		}
		r.invocation(file, cw, args, env)
		r.required(cw, args, env)
		shutdown := env["SQUALL_SHUTDOWN_TIMEOUT"]
		grace := "30s" // the Kubernetes default
		if g := get(spec, "terminationGracePeriodSeconds"); g != nil {
			grace = fmt.Sprint(g) + "s"
		}
		r.checkGrace(cw, "terminationGracePeriodSeconds", grace, shutdown)
	}
}

// yamlDocuments decodes every document of a YAML stream.
func yamlDocuments(b []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
}

// get walks a decoded YAML document by mapping keys.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, keys ...string) string {
	s, _ := get(v, keys...).(string)
	return s
}

func mapping(v any, keys ...string) map[string]any {
	m, _ := get(v, keys...).(map[string]any)
	return m
}

func list(v any, keys ...string) []any {
	l, _ := get(v, keys...).([]any)
	return l
}

// unit checks a systemd unit: ExecStart runs squall with flags that exist,
// and the variables of Environment= and EnvironmentFile= exist for its
// command; hardening and stop settings are present.
func (r *deployReport) unit(file string, b []byte) {
	r.comments(file, b)
	keys := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var cont strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(s + " ")
			continue
		}
		line = cont.String() + line
		cont.Reset()
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			r.problem(file, "line %q is not KEY=VALUE", line)
			continue
		}
		keys[strings.TrimSpace(k)] = append(keys[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=", "KillSignal=SIGTERM"} {
		k, v, _ := strings.Cut(want, "=")
		if !slices.Contains(keys[k], v) {
			r.problem(file, "want %s", want)
		}
	}
	if len(keys["User"]) == 0 && !slices.Contains(keys["DynamicUser"], "yes") {
		r.problem(file, "want User= or DynamicUser=yes")
	}
	if len(keys["ExecStart"]) != 1 {
		r.problem(file, "want one ExecStart")
		return
	}
	args := shellFields(keys["ExecStart"][0])
	if len(args) == 0 || path.Base(strings.TrimLeft(args[0], "-@:+!")) != "squall" {
		r.problem(file, "ExecStart %q does not run squall", keys["ExecStart"][0])
		return
	}
	env := map[string]string{}
	for _, e := range keys["Environment"] {
		for _, kv := range shellFields(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	own := maps.Clone(env) // Environment= ; the files' variables are checked per file
	for _, f := range keys["EnvironmentFile"] {
		name := path.Join(path.Dir(file), path.Base(strings.TrimPrefix(f, "-")))
		b, err := os.ReadFile(filepath.Join(r.root, name))
		if err != nil {
			r.problem(file, "EnvironmentFile %s: want its example as %s", f, name)
			continue
		}
		r.envFiles[name] = true
		if len(args) > 1 && r.help[args[1]].flags != nil { // an unknown command is reported once, below
			r.invocation(name, name, args[1:2], envFileVars(b, true))
		}
		for k, v := range envFileVars(b, false) {
			env[k] = v // the file wins over Environment=
		}
	}
	r.invocation(file, file+": ExecStart", args[1:], own)
	r.required(file, args[1:], env)
	stop := "90s" // systemd's default
	if s := keys["TimeoutStopSec"]; len(s) > 0 {
		stop = s[len(s)-1]
	}
	r.checkGrace(file, "TimeoutStopSec", stop, env["SQUALL_SHUTDOWN_TIMEOUT"])
}

// envFileVars returns the variables an env file sets; with commented, the
// commented-out assignments too (they document settings to turn on).
func envFileVars(b []byte, commented bool) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if s, ok := strings.CutPrefix(line, "#"); ok {
			if !commented {
				continue
			}
			line = strings.TrimSpace(s)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			continue
		}
		vars[k] = v
	}
	return vars
}

// shellFields splits a command line into words, honouring single and
// double quotes.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, c := range s {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// readme checks the squall commands of the README's code blocks.
func (r *deployReport) readme(file string, b []byte) {
	var lines []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
		} else if inBlock {
			lines = append(lines, line)
		}
	}
	r.commandLines(file, lines)
}

// comments checks the squall commands that the comments of a YAML file or
// a unit show, such as the preparation steps atop compose.yaml. Commands in
// comments are indented ("#   squall token ..."), prose is not.
func (r *deployReport) comments(file string, b []byte) {
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#  "); ok {
			lines = append(lines, c)
		}
	}
	r.commandLines(file, lines)
}

// commandLines checks the squall commands of shell lines: a word squall
// first on a line, a path ending in /squall, or the image squall:TAG,
// followed by a command. Lines ending in a backslash continue on the next.
func (r *deployReport) commandLines(file string, lines []string) {
	var cur strings.Builder
	for _, line := range lines {
		if s, ok := strings.CutSuffix(strings.TrimSpace(line), `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmdline := strings.TrimPrefix(strings.TrimSpace(cur.String()), "$ ")
		cur.Reset()
		if strings.HasPrefix(cmdline, "#") {
			continue
		}
		words := shellFields(cmdline)
		for i := 0; i < len(words)-1; i++ {
			// OPS=$(squall token ...): a command substitution.
			w, sub := words[i], false
			if m := substitution.FindStringSubmatch(w); m != nil {
				w, sub = m[1], true
			}
			isSquall := ((i == 0 || sub) && w == "squall") || strings.HasSuffix(w, "/squall") || squallImage.MatchString(w)
			if !isSquall || !commandWord.MatchString(words[i+1]) {
				continue
			}
			args := []string{}
			end := i + 1
			for ; end < len(words) && !slices.Contains([]string{"|", ">", ">>", "&&", "||", ";", "2>&1"}, words[end]); end++ {
				if a, closed := strings.CutSuffix(words[end], ")"); sub && closed {
					args = append(args, a)
					break
				}
				args = append(args, words[end])
			}
			r.invocation(file, file, args, nil)
			i = end
		}
	}
}

var (
	requiredFlag = regexp.MustCompile(`[(;] ?required\)`) // "(required)" or "(…; required)" in a flag's usage
	substitution = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]*=)?\$\((.*)$`)
	squallImage  = regexp.MustCompile(`^squall:[\w.-]+$`)
	commandWord  = regexp.MustCompile(`^[a-z][a-z-]*$`)
)
