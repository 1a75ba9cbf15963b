package store

import (
	"testing"

	"github.com/squallhq/squall/internal/leaktest"
)

// TestMain fails the run if any goroutine outlives the tests: every server
// or store a test starts must stop everything it started.
func TestMain(m *testing.M) { leaktest.MainAll(m) }
