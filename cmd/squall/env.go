package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "SQUALL_"

// envName returns the environment variable of a flag: SQUALL_ and the
// flag's name in upper case with dashes as underscores (node-id:
// SQUALL_NODE_ID).
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag of cmd that was not given on the command line
// from its environment variable (see flagEnv), read with lookup
// (os.LookupEnv). Empty variables count as unset. A value the flag
// refuses is an error naming the variable.
func bindEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var errs []error
	fs := cmd.Flags()
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		name := flagEnv(f)
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (flag --%s): %w", name, v, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// documentEnv appends each flag's environment variable to its usage.
func documentEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [" + flagEnv(f) + "]"
	})
}
