//go:build race

package webhooks

// raceEnabled is true when the race detector is on: sync.Pool then drops
// some of what it is given, so allocation counts mean nothing.
const raceEnabled = true
