//go:build !unix

package spool

import (
	"fmt"
	"os"
)

// lockDir opens the lock file; other systems than Unix get no flock(2), so
// the spool directory must not be shared there.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open spool lock: %w", err)
	}
	return f, nil
}
