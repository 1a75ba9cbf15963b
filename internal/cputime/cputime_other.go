//go:build !unix

package cputime

import "time"

// Process reports that this platform gives no CPU time here.
func Process() (time.Duration, bool) { return 0, false }
