//go:build !linux

package cputime

import "time"

// Thread reports that this platform gives no thread CPU time here.
func Thread() (time.Duration, bool) { return 0, false }
