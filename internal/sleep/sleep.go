// Package sleep waits a while unless a context ends first: the pause
// between retries and polls of the services' loops.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; it reports whether d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
