package backtests

import (
	"testing"

	"github.com/squallhq/squall/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
