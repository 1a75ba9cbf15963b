package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"
)

func newExportCommand() *cobra.Command {
	var masterURL, tokenFile, authName, draftID, nodePath, output string
	cmd := &cobra.Command{
		Use:   "export --master URL --token-file F [--node-path PATH] [--draft ID] [-o FILE]",
		Short: "Export the active tree (or the draft) of a master as an export file",
		Example: `  squall export --master http://127.0.0.1:8080 --token-file ops.token -o active.json
  squall export --master http://127.0.0.1:8080 --token-file ops.token --draft "$DRAFT" --node-path root,tenant-a`,
		Long: `Export fetches a tree from a master and writes it as an export file, the
format that squall process reads and that the API imports into a draft.

By default it exports the active tree, from the node --node-path (default
root, written from the authorization's node) down; with --draft it exports that
draft instead. Exporting the active tree creates no draft, so it leaves the
current draft alone. The token (--token-file) needs view on the authorization
--auth.

The file goes to standard output, or to --output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAPIClient(masterURL, tokenFile)
			if err != nil {
				return err
			}
			path := "/api/v2_beta/config/active/tree/export/" + url.PathEscape(authName) + "/" + url.PathEscape(nodePath)
			if draftID != "" {
				path = "/api/v2_beta/config/draft/tree/export/" + url.PathEscape(authName) + "/" + url.PathEscape(draftID) + "/" + url.PathEscape(nodePath)
			}
			var file json.RawMessage
			if err := c.do(http.MethodGet, path, "", nil, &file); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			return writeTreeFile(cmd.OutOrStdout(), file, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&masterURL, "master", "", "base URL of a master (e.g. http://127.0.0.1:8080)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API token (view on --auth)")
	f.StringVar(&authName, "auth", "all", "authorization of the token to use")
	f.StringVar(&draftID, "draft", "", "export this draft instead of the active tree")
	f.StringVar(&nodePath, "node-path", "root", "node to export, with what lies below it, written from the authorization's node")
	f.StringVarP(&output, "output", "o", "", "write the file here instead of standard output")
	_ = cmd.MarkFlagRequired("master")
	_ = cmd.MarkFlagRequired("token-file")
	return cmd
}

// writeTreeFile writes an exported tree, ending with a newline, to the
// file output names, or to w when output is "".
func writeTreeFile(w io.Writer, file []byte, output string) error {
	if !bytes.HasSuffix(file, []byte("\n")) {
		file = append(file, '\n')
	}
	if output == "" {
		_, err := w.Write(file)
		return err
	}
	if err := os.WriteFile(output, file, 0o644); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}
