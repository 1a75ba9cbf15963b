package watcher

import (
	"testing"

	"github.com/squallhq/squall/satellite/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
