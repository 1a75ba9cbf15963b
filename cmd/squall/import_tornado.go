package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/config/tornado"
	"github.com/squallhq/squall/engine/action"
)

func newImportTornadoCommand() *cobra.Command {
	var masterURL, tokenFile, authName, draftID, nodePath string
	var allowUnsupported, force bool
	var importTornado func(cmd *cobra.Command, dir string) error
	cmd := &cobra.Command{
		Use:   "import-tornado DIR [--master URL --token-file F]",
		Short: "Convert a Tornado configuration directory into a Squall export file, or import it into a draft",
		Example: `  squall import-tornado tornado-config/ > tree.json
  squall import-tornado tornado-config/ --master http://127.0.0.1:8080 --token-file ops.token`,
		Long: `Import-tornado reads a Tornado v2 configuration directory (the rules.d layout:
version.json, one directory per node holding filter.json, iterator.json or
ruleset.json, rules in rules/) and prints the tree as a Squall export file,
ready for squall process or for importing into a draft.

Actions whose id no Squall executor handles (Tornado's icinga2, director,
smart_monitoring_check_result...) are listed on standard error with the
ruleset and rule that hold them, and the command fails; with
--allow-unsupported-actions the list is a warning and the tree is converted
(the engine sends the events of those actions to the dead-letter topic).

With --master, it imports the tree into a draft of that master instead: it
creates a new draft (or uses --draft), replaces the node --node-path (default
root: the whole tree) with the Tornado tree, and prints the draft's id. Creating
a draft replaces the master's current one: when there is one, the command
names its owner and stops, unless --force. Review the draft with the API, then
deploy it. The token (--token-file) needs edit on the authorization --auth.

The tree is validated first; a problem is reported with the file or the node
path it comes from, and nothing is printed on standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every error of the import starts alike.
			err := importTornado(cmd, args[0])
			if err != nil && !strings.HasPrefix(err.Error(), "import-tornado: ") {
				err = fmt.Errorf("import-tornado: %w", err)
			}
			return err
		},
	}
	importTornado = func(cmd *cobra.Command, dir string) error {
		if err := checkRulesFolder(dir); err != nil {
			return err
		}
		root, err := readRulesFolder(dir)
		if err != nil {
			return err
		}
		if bad := action.UnsupportedInTree(root, nil); len(bad) > 0 {
			if !allowUnsupported {
				fmt.Fprint(cmd.ErrOrStderr(), unsupportedReport(bad, "error"))
				return fmt.Errorf("import-tornado: %s no executor in Squall; replace them, or pass --allow-unsupported-actions to convert them anyway", actionsHave(len(bad)))
			}
			fmt.Fprint(cmd.ErrOrStderr(), unsupportedReport(bad, "warning"))
		}
		out, err := config.EncodeExport(root)
		if err != nil {
			return err
		}
		if masterURL == "" {
			_, err = cmd.OutOrStdout().Write(out)
			return err
		}
		c, err := newAPIClient(masterURL, tokenFile)
		if err != nil {
			return err
		}
		if draftID == "" {
			if draftID, err = c.newDraft("import-tornado", authName, "Pass --draft {id} to import into it (its owner only), or --force to replace it", force, cmd.ErrOrStderr()); err != nil {
				return err
			}
		}
		if err := c.importInto(authName, draftID, nodePath, out); err != nil {
			return err
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), draftID)
		return err
	}
	f := cmd.Flags()
	f.StringVar(&masterURL, "master", "", "import into a draft of this master (e.g. http://127.0.0.1:8080) instead of printing")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API token (with --master)")
	f.StringVar(&authName, "auth", "all", "authorization of the token to use (with --master)")
	f.StringVar(&draftID, "draft", "", "draft to import into (default: create a new draft)")
	f.StringVar(&nodePath, "node-path", "root", "node of the draft the tree replaces, written from the authorization's node")
	f.BoolVar(&allowUnsupported, "allow-unsupported-actions", false, "convert actions that no Squall executor handles (listed as a warning) instead of failing")
	f.BoolVar(&force, "force", false, "with --master and no --draft: replace the master's current draft, whoever owns it")
	cmd.MarkFlagsRequiredTogether("master", "token-file")
	return cmd
}

// rulesFolderLayout says what import-tornado reads, for its error messages.
const rulesFolderLayout = "the rules.d directory: version.json and one folder per node holding filter.json, iterator.json or ruleset.json"

// checkRulesFolder tells what is wrong when dir is not a directory.
func checkRulesFolder(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("import-tornado: no Tornado rules folder at %q (expected %s)", dir, rulesFolderLayout)
	case err != nil:
		return fmt.Errorf("import-tornado: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("import-tornado: %q is a file, not a Tornado rules folder (expected %s)", dir, rulesFolderLayout)
	}
	return nil
}

// readRulesFolder reads and validates the tree of a Tornado rules folder.
func readRulesFolder(dir string) (*config.Node, error) {
	// Read from the parent, so that errors name the files from the
	// folder given: rules.d/ruleset_01/ruleset.json, not ruleset_01/….
	clean := filepath.Clean(dir)
	fsys, top := os.DirFS(filepath.Dir(clean)), filepath.Base(clean)
	if !fs.ValidPath(top) {
		fsys, top = os.DirFS(dir), "."
	}
	root, err := tornado.Read(fsys, top)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", dir, err)
	}
	if err := config.Validate(root); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return root, nil
}

// actionsHave is "1 action has" or "n actions have".
func actionsHave(n int) string {
	if n == 1 {
		return "1 action has"
	}
	return fmt.Sprintf("%d actions have", n)
}

// unsupportedReport writes the list of unsupported actions, one a line.
func unsupportedReport(bad []action.Unsupported, level string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "import-tornado: %s: %s no executor in Squall (it has %s):\n", level, actionsHave(len(bad)), strings.Join(action.BuiltinIDs(), ", "))
	for _, a := range bad {
		fmt.Fprintf(&b, "  action %q in ruleset %s, rule %s\n", a.ID, a.Ruleset, a.Rule)
	}
	return b.String()
}

// apiClient calls the master's API.
type apiClient struct {
	base, token string
	http        *http.Client
}

// do sends a request; a non-2xx answer is an error carrying the answer's
// message. out, when set, receives the JSON answer.
func (c *apiClient) do(method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Code, Message string }
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Code, e.Message)
		}
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
