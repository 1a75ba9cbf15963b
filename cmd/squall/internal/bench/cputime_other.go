//go:build !unix

package bench

import "time"

// processCPU reports that this platform gives no CPU time here.
func processCPU() (time.Duration, bool) { return 0, false }
