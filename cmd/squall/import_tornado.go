package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/config/tornado"
)

func newImportTornadoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "import-tornado DIR",
		Short: "Convert a Tornado configuration directory into a Squall export file",
		Long: `Import-tornado reads a Tornado v2 configuration directory (the rules.d layout:
version.json, one directory per node holding filter.json, iterator.json or
ruleset.json, rules in rules/) and prints the tree as a Squall export file,
ready for squall process or for importing into a draft.

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
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}
