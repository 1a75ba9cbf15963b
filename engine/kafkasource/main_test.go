package kafkasource

import (
	"testing"

	"github.com/squallhq/squall/engine/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
