//go:build linux

package cputime

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1

// Thread returns the CPU time (user and system) the calling OS thread has
// used so far, and whether the platform reports it. It means something
// only to a goroutine locked to its thread (runtime.LockOSThread).
func Thread() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
