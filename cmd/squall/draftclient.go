package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master"
)

// newAPIClient returns a client of the master at masterURL with the token
// held in tokenFile.
func newAPIClient(masterURL, tokenFile string) (*apiClient, error) {
	tok, err := readTokenFile("token-file", tokenFile)
	if err != nil {
		return nil, err
	}
	return &apiClient{base: strings.TrimRight(masterURL, "/"), token: tok, http: &http.Client{Timeout: time.Minute}}, nil
}

// newDraft creates a draft for the authorization authName and returns its
// id. Creating a draft replaces the master's current one, whoever owns it:
// when there is one, newDraft refuses, naming its owner and the remedy,
// unless force (then it writes a warning on warn). cmd names the command
// in messages.
func (c *apiClient) newDraft(cmd, authName, remedy string, force bool, warn io.Writer) (string, error) {
	cur, err := c.currentDraft()
	if err != nil {
		return "", err
	}
	if cur != nil {
		if !force {
			return "", fmt.Errorf("%s: the master already has a draft, %s, owned by %q (last changed %s); a new draft would replace it. %s",
				cmd, cur.ID, cur.Owner, time.UnixMilli(cur.UpdatedMS).UTC().Format(time.RFC3339), strings.ReplaceAll(remedy, "{id}", cur.ID))
		}
		fmt.Fprintf(warn, "%s: warning: --force: replacing draft %s owned by %q\n", cmd, cur.ID, cur.Owner)
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := c.do(http.MethodPost, "/api/v2_beta/config/drafts/"+url.PathEscape(authName), "", nil, &d); err != nil {
		return "", fmt.Errorf("create a draft: %w", err)
	}
	return d.ID, nil
}

// currentDraft returns the master's draft, nil when there is none.
func (c *apiClient) currentDraft() (*master.DraftInfo, error) {
	var cur *master.DraftInfo
	if err := c.do(http.MethodGet, "/squall/v1/draft", "", nil, &cur); err != nil {
		return nil, fmt.Errorf("read the current draft: %w", err)
	}
	return cur, nil
}

// importInto replaces the node nodePath of a draft with the tree of an
// export file.
func (c *apiClient) importInto(authName, draftID, nodePath string, export []byte) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "tree.json")
	if err != nil {
		return err
	}
	if _, err := fw.Write(export); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	path := "/api/v2_beta/config/draft/tree/import/" + url.PathEscape(authName) + "/" + url.PathEscape(draftID) + "/" + url.PathEscape(nodePath)
	if err := c.do(http.MethodPut, path, mw.FormDataContentType(), &body, nil); err != nil {
		return fmt.Errorf("import into draft %s: %w", draftID, err)
	}
	return nil
}

// exportTree reads the whole active tree, or a draft's when draftID is set.
func (c *apiClient) exportTree(authName, draftID string) (*config.Node, error) {
	path := "/api/v2_beta/config/active/tree/export/" + url.PathEscape(authName) + "/root"
	what := "the active tree"
	if draftID != "" {
		path = "/api/v2_beta/config/draft/tree/export/" + url.PathEscape(authName) + "/" + url.PathEscape(draftID) + "/root"
		what = "draft " + draftID
	}
	var file json.RawMessage
	if err := c.do(http.MethodGet, path, "", nil, &file); err != nil {
		return nil, fmt.Errorf("export %s: %w", what, err)
	}
	ex, err := config.DecodeExport(file)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", what, err)
	}
	return ex.Node, nil
}
