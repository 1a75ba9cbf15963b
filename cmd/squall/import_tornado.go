package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/config/tornado"
)

func newImportTornadoCommand() *cobra.Command {
	var masterURL, tokenFile, authName, draftID, nodePath string
	cmd := &cobra.Command{
		Use:   "import-tornado DIR [--master URL --token-file F]",
		Short: "Convert a Tornado configuration directory into a Squall export file, or import it into a draft",
		Long: `Import-tornado reads a Tornado v2 configuration directory (the rules.d layout:
version.json, one directory per node holding filter.json, iterator.json or
ruleset.json, rules in rules/) and prints the tree as a Squall export file,
ready for squall process or for importing into a draft.

With --master, it imports the tree into a draft of that master instead: it
creates a new draft (or uses --draft), replaces the node --node-path (default
root: the whole tree) with the Tornado tree, and prints the draft's id. Review
it with the API, then deploy it. The token (--token-file) needs edit on the
authorization --auth.

The tree is validated first; a problem is reported with the file or the node
path it comes from, and nothing is printed on standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := tornado.Read(os.DirFS(args[0]), ".")
			if err != nil {
				return fmt.Errorf("import %s: %w", args[0], err)
			}
			if err := config.Validate(root); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			out, err := config.EncodeExport(root)
			if err != nil {
				return err
			}
			if masterURL == "" {
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			tok, err := os.ReadFile(tokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			c := &apiClient{base: strings.TrimRight(masterURL, "/"), token: strings.TrimSpace(string(tok)), http: &http.Client{Timeout: time.Minute}}
			if draftID == "" {
				var d struct {
					ID string `json:"id"`
				}
				if err := c.do(http.MethodPost, "/api/v2_beta/config/drafts/"+url.PathEscape(authName), "", nil, &d); err != nil {
					return fmt.Errorf("create a draft: %w", err)
				}
				draftID = d.ID
			}
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, err := mw.CreateFormFile("file", "tornado.json")
			if err != nil {
				return err
			}
			if _, err := fw.Write(out); err != nil {
				return err
			}
			if err := mw.Close(); err != nil {
				return err
			}
			path := "/api/v2_beta/config/draft/tree/import/" + url.PathEscape(authName) + "/" + url.PathEscape(draftID) + "/" + url.PathEscape(nodePath)
			if err := c.do(http.MethodPut, path, mw.FormDataContentType(), &body, nil); err != nil {
				return fmt.Errorf("import into draft %s: %w", draftID, err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), draftID)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&masterURL, "master", "", "import into a draft of this master (e.g. http://127.0.0.1:8080) instead of printing")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API token (with --master)")
	f.StringVar(&authName, "auth", "all", "authorization of the token to use (with --master)")
	f.StringVar(&draftID, "draft", "", "draft to import into (default: create a new draft)")
	f.StringVar(&nodePath, "node-path", "root", "node of the draft the tree replaces, written from the authorization's node")
	cmd.MarkFlagsRequiredTogether("master", "token-file")
	return cmd
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
