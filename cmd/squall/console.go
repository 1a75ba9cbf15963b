package main

import (
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/master/fleet"
)

// fleetListFlags defines the fleet list's settings of a master.
func fleetListFlags(f *pflag.FlagSet, c *fleet.Config) {
	f.DurationVar(&c.StaleAfter, "fleet-stale-after", c.StaleAfter, "how long after its last heartbeat an engine or satellite is shown as stale in the fleet list (a few times their --fleet-interval)")
	f.DurationVar(&c.DropAfter, "fleet-drop-after", c.DropAfter, "how long after its last heartbeat an engine or satellite is dropped from the fleet list")
	f.IntVar(&c.MaxPerReporter, "fleet-max-per-reporter", c.MaxPerReporter,
		"the most engines and satellites one reporter (the user its heartbeat token names) may hold in the fleet list, of its 1,000")
}
