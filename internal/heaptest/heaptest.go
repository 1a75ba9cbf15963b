// Package heaptest measures the heap a benchmark's structure keeps.
package heaptest

import "runtime"

// Live returns the bytes of live heap objects after two full collections
// (the second frees what finalizers and pools let go in the first).
func Live() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
