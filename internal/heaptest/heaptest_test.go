package heaptest

import (
	"runtime"
	"testing"
)

// TestLive: a kept 8 MiB block is in the live heap, and gone from it once
// dropped.
func TestLive(t *testing.T) {
	const size = 8 << 20
	before := Live()
	block := make([]byte, size)
	kept := Live()
	runtime.KeepAlive(block)
	after := Live()
	if kept < before+size*3/4 {
		t.Errorf("live heap %d with the block, %d before it: want %d more", kept, before, size)
	}
	if after > kept-size*3/4 {
		t.Errorf("live heap %d after the block was dropped, %d with it", after, kept)
	}
}
