package util

import "runtime"

// RetainedPerObject is the live heap that n objects made by newObj hold,
// per object: what a cache of them keeps.
func RetainedPerObject(n int, newObj func(i int) any) float64 {
	objs := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range objs {
		objs[i] = newObj(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(objs)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
