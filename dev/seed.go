package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// Files and folders of the dev data dir.
const (
	keyFile        = "token.key"  // HS256 key of the tokens
	joinTokenFile  = "join.token" // join secret of the single-node cluster
	AdminTokenFile = "admin.token"
	// findingTokenFile is the finding executor's token (tenant master).
	findingTokenFile = "finding.token"
	actionsFile      = "actions.json"
	// WebhookTokenFile holds the example webhook's token, random per
	// data dir (the README's tour reads it).
	WebhookTokenFile = "webhook.token"
	webhooksDir      = "webhooks"
	ArchiveDir       = "archive"
)

// Lifetimes of the tokens minted at every start.
const (
	adminTTL  = 30 * 24 * time.Hour
	engineTTL = 365 * 24 * time.Hour
)

// The example seeded on first start: a webhook, an archive file, a tenant.
const (
	WebhookID   = "disk_alerts"
	ArchiveFile = "disk_alerts.log"
	Tenant      = "master"
)

// exampleWebhook is webhooks/disk_alerts.json, with its token in
// place of %s: a call's body {"host": ..., "message": ...} becomes a
// disk_alert event.
const exampleWebhook = `{
  "id": "disk_alerts",
  "token": "%s",
  "collector_config": {
    "event_type": "disk_alert",
    "payload": {"host": "${host}", "message": "${message}"}
  }
}
`

// legacyWebhookToken is the fixed token that versions before the
// random one seeded: a data dir whose example webhook file still holds it
// unchanged gets a random token on its next start.
const legacyWebhookToken = "example-token"

// exampleTree is the subtree deployed below root on first start (export
// form, docs/rules.md): a filter on tenant master holding a ruleset whose
// rule extracts the disk usage from the message and archives the event
// with it.
const exampleTree = `{"version": "1.1",
 "Filter": {"name": "master",
  "filter": {"description": "Events of tenant master", "active": true,
             "filter": {"type": "equals", "first": "${event.metadata.tenant_id}", "second": "master"}},
  "nodes": [
   {"Ruleset": {"name": "disks", "rules": [
    {"name": "archive_disk_alerts",
     "description": "Archive every disk alert with the usage its message reports",
     "continue": true, "active": true,
     "constraint": {
      "WHERE": {"type": "equals", "first": "${event.type}", "second": "disk_alert"},
      "WITH": {"used_percent": {"from": "${event.payload.message}",
                                "regex": {"type": "Regex", "match": "([0-9]+)%", "group_match_idx": 1, "all_matches": false},
                                "modifiers_post": [{"type": "ToNumber"}]}}},
     "actions": [
      {"id": "archive", "payload": {"archive_type": "disk_alerts",
        "event": {"host": "${event.payload.host}", "used_percent": "${_variables.used_percent}", "event": "${event}"}}}]}
   ]}}
  ]}}
`

// dataDir is the dev data dir, prepared for a start.
type dataDir struct {
	// dir is the directory as given (relative paths stay relative, so
	// that the printed commands read like the README's).
	dir string
	// firstStart is true when the master had no state yet.
	firstStart bool
	// tokenReplaced is true when the example webhook still had the fixed
	// token of older versions and got a random one.
	tokenReplaced bool
	// adminToken, engineToken and findingToken are minted at every start.
	adminToken, engineToken, findingToken string
}

// path returns a path inside the data dir.
func (d *dataDir) path(elem ...string) string {
	return filepath.Join(append([]string{d.dir}, elem...)...)
}

// prepareDir creates the data dir and what a start needs: the token
// key and join secret (first start), the example webhook and executor
// settings (only when missing, so that edits are kept), and fresh admin
// and engine tokens.
func prepareDir(dir string) (*dataDir, error) {
	d := &dataDir{dir: filepath.Clean(dir)}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if _, err := os.Stat(d.path("master")); errors.Is(err, fs.ErrNotExist) {
		d.firstStart = true
	}
	for _, f := range []struct {
		name  string
		bytes int
	}{{keyFile, 32}, {joinTokenFile, 16}} {
		if err := createIfMissing(d.path(f.name), func(w io.Writer) error {
			b := make([]byte, f.bytes)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			_, err := fmt.Fprintln(w, hex.EncodeToString(b))
			return err
		}); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(d.path(webhooksDir), 0o700); err == nil {
		if err := d.seedWebhook(false); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("data dir: %w", err)
	} else if b, err := os.ReadFile(d.path(webhooksDir, WebhookID+".json")); err == nil &&
		string(b) == fmt.Sprintf(exampleWebhook, legacyWebhookToken) {
		// A data dir of an older version, its example webhook unchanged:
		// any web page could post to it with the well-known token.
		if err := d.seedWebhook(true); err != nil {
			return nil, err
		}
		d.tokenReplaced = true
	}
	archive, err := filepath.Abs(d.path(ArchiveDir))
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := createIfMissing(d.path(actionsFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"archive": map[string]any{
			"base_path":    archive,
			"default_path": "events.log",
			"paths":        map[string]string{"disk_alerts": ArchiveFile},
		}})
	}); err != nil {
		return nil, err
	}

	key, err := auth.LoadHMACKey(d.path(keyFile))
	if err != nil {
		return nil, err
	}
	signer := auth.Signer{HMACKey: key}
	root := []string{config.RootName}
	if d.adminToken, err = signer.Sign(auth.Claims{User: "admin", Tenant: Tenant,
		Auths: map[string]auth.Authorization{"all": {Path: root, Roles: []string{string(auth.Admin)}}}}, adminTTL); err != nil {
		return nil, err
	}
	// view for the tree, fleet_report for the backtests it claims.
	if d.engineToken, err = signer.Sign(auth.Claims{User: "squall-engine",
		Auths: map[string]auth.Authorization{"all": {Path: root, Roles: []string{string(auth.View), string(auth.FleetReport)}}}}, engineTTL); err != nil {
		return nil, err
	}
	// The finding executor's: it inserts findings and reads none
	// (findings_write on the tenant, decision 8).
	if d.findingToken, err = signer.Sign(auth.FindingsClaims("squall-engine", Tenant, auth.FindingsWrite), engineTTL); err != nil {
		return nil, err
	}
	return d, nil
}

// seedWebhook writes the example webhook with a random token, and the
// token to webhook.token. replace overwrites an existing webhook file;
// otherwise an existing one is kept.
func (d *dataDir) seedWebhook(replace bool) error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	token := hex.EncodeToString(b)
	if err := os.WriteFile(d.path(WebhookTokenFile), []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	hook := d.path(webhooksDir, WebhookID+".json")
	content := fmt.Sprintf(exampleWebhook, token)
	if !replace {
		return createIfMissing(hook, writeString(content))
	}
	// Written aside then renamed: the watcher never sees half a file.
	tmp := hook + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Rename(tmp, hook); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}

// writeTokens writes the admin token to admin.token and the finding
// executor's to finding.token; call it once the master holds the data dir,
// so that a second squall dev refused there leaves the files alone.
func (d *dataDir) writeTokens() error {
	for _, f := range []struct{ name, token string }{
		{AdminTokenFile, d.adminToken}, {findingTokenFile, d.findingToken},
	} {
		if err := os.WriteFile(d.path(f.name), []byte(f.token+"\n"), 0o600); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}

// actionsConfig returns the executor settings of actions.json, with the
// finding executor pointed at this process's findings API (tenant master)
// unless the file configures it.
func (d *dataDir) actionsConfig(masterURL string) (*action.Config, error) {
	cfg, err := action.Load(d.path(actionsFile))
	if err != nil {
		return nil, err
	}
	if len(cfg.Finding.MasterURLs) == 0 {
		cfg.Finding.MasterURLs = []string{masterURL}
		cfg.Finding.TokenFile = d.path(findingTokenFile)
	}
	return &cfg, nil
}

// createIfMissing writes a new file with mode 0600 through write, unless
// the file exists. A failed write leaves no file behind.
func createIfMissing(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := errors.Join(write(f), f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("data dir: write %s: %w", path, err)
	}
	return nil
}

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// exampleNode returns the example tree: root with the example subtree.
func exampleNode() (*config.Node, error) {
	ex, err := config.DecodeExport([]byte(exampleTree))
	if err != nil {
		return nil, fmt.Errorf("example tree: %w", err)
	}
	root := config.NewRoot()
	root.Children = []*config.Node{ex.Node}
	return root, nil
}

// seedTree deploys the example tree while the active tree is still the
// initial one (index 0): on first start, never over a tree you deployed.
func seedTree(ctx context.Context, st *store.Store, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := st.WaitForLeader(ctx); err != nil {
		return fmt.Errorf("example tree: %w", err)
	}
	if err := st.ConsistentRead(ctx); err != nil {
		return fmt.Errorf("example tree: %w", err)
	}
	if _, index := st.Active(); index != 0 {
		return nil
	}
	tree, err := exampleNode()
	if err != nil {
		return err
	}
	index, err := st.ReplaceActive(ctx, tree)
	if err != nil {
		return fmt.Errorf("example tree: %w", err)
	}
	logger.Info("deployed the example tree", "tree_index", index)
	return nil
}

// printBanner prints where everything is and three commands to try.
func printBanner(w io.Writer, addr string, d *dataDir, broker string) {
	base := "http://" + addr
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("squall dev: master, webhook intake, engine and Kafka broker in one process")
	p("  console       %s  (signs in as admin)", consoleLink(addr, d.adminToken))
	p("  APIs          %s/api/v2_beta/  %s/intel/api/sdk/v0/  (docs/api.md, docs/findings.md)", base, base)
	p("  webhooks      %s/engine/webhook/event/{id}?token=...  (files in %s)", base, d.path(webhooksDir))
	p("  probes        %s/healthz  %s/readyz  %s/metrics  (engine: %s%s/readyz)", base, base, base, base, EnginePrefix)
	p("  Kafka broker  %s  (topic squall.events; --kafka-addr; attach satellites and engines here)", broker)
	p("  data dir      %s  (delete it to start over)", d.dir)
	p("  admin token   %s", d.adminToken)
	p("                (in %s; valid %d days, a restart mints a new one)", d.path(AdminTokenFile), int(adminTTL.Hours()/24))
	p("  webhook token %s  (random per data dir; the example webhook's)", d.path(WebhookTokenFile))
	p("WARNING: dev mode also accepts unsigned tokens: anyone who reaches %s is an admin. Never expose it.", addr)
	p("         It answers only requests for %s, localhost or a loopback address (Host header).", addr)
	p("")
	p("Try it:")
	p("  # 1. send a webhook")
	p(`  curl -sS -X POST "%s/engine/webhook/event/%s?token=$(cat %s)" -H "Content-Type: application/json" -d '{"host": "web-1", "message": "Disk 95%% full on /var"}'`,
		base, WebhookID, d.path(WebhookTokenFile))
	p("  # 2. see the archived event (with the extracted used_percent)")
	p("  cat %s", d.path(ArchiveDir, ArchiveFile))
	p("  # 3. send a test event through the active tree")
	p(`  curl -sS -X POST "%s/api/v2_beta/event/active/all" -H "Authorization: Bearer $(cat %s)" -H "Content-Type: application/json" -d '%s'`,
		base, d.path(AdminTokenFile), testEvent)
	p("")
	p("Ctrl-C stops (or kill $(cat %s)); a restart keeps everything.", d.path(PIDFile))
	_, _ = io.WriteString(w, b.String())
}

// testEvent is the body of the tour's test event.
const testEvent = `{"process_type": "SkipActions", "event": {"type": "disk_alert", "created_ms": 1700000000000, "metadata": {"tenant_id": "master"}, "payload": {"host": "web-1", "message": "Disk 95% full on /var"}}}`
