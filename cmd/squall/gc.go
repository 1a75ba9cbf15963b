package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// hotPathGCPercent is the GOGC of the roles whose every event allocates
// (squall satellite and squall engine) when the environment sets none. Their
// live heaps are small (a few MB to a few tens: trees, dedupe window,
// connections), so a heap growing to 5× the live one before a collection
// costs little memory and takes about a tenth of their CPU per event off the
// collector (docs/BENCHMARKS.md, "Engine"). GOGC and GOMEMLIMIT, when
// set, win.
const hotPathGCPercent = 400

// tuneGC applies hotPathGCPercent unless GOGC is set.
func tuneGC(logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return
	}
	debug.SetGCPercent(hotPathGCPercent)
	logger.Debug("GOGC not set: the collector runs at GOGC=400", "gogc", hotPathGCPercent)
}
