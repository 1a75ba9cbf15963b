package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// cpuProfileFlag defines --cpu-profile on a long-running role. It is off by
// default and writes only to a local file: no endpoint serves profiles.
func cpuProfileFlag(f *pflag.FlagSet, path *string) {
	f.StringVar(path, "cpu-profile", "", "write a CPU profile (pprof format) of this process to this file until it stops; for profile-guided builds and diagnosis (default: none)")
}

// startCPUProfile starts the CPU profile of the process into the file at
// path; the returned function stops it and closes the file. An empty path
// profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("--cpu-profile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		return nil
	}, nil
}
