// Package intern keeps one copy of the short strings and small string
// maps that many cached objects carry alike: the AppWrapper cache and the
// trigger informers share Cache.
package intern

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// Interner keeps one copy of the short strings and small string maps that
// many cached objects carry alike: namespaces, owner references' kinds,
// condition types and reasons, the label and annotation sets of
// AppWrappers made from one template. A Go map costs about 300 bytes
// however few its entries, and a decoded string is an allocation per
// object. Cached objects are never written (the cache hands out deep
// copies), so they may share a map. When it holds limit entries, it starts
// again empty (the objects keep what they share).
type Interner struct {
	mu      sync.Mutex
	limit   int
	strings map[string]string
	maps    map[string]map[string]string
}

const (
	// Limit bounds the strings and the maps an Interner keeps.
	Limit = 1 << 14
	// maxLen is the longest string (and the largest map, in bytes of
	// content) that is interned: longer ones are rarely shared.
	maxLen = 256
)

// New returns an Interner that holds at most limit strings and limit maps.
func New(limit int) *Interner {
	return &Interner{limit: limit, strings: map[string]string{}, maps: map[string]map[string]string{}}
}

// Cache interns what the cache transforms keep.
var Cache = New(Limit)

// Str returns the interned copy of s.
func (in *Interner) Str(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.strLocked(s)
}

func (in *Interner) strLocked(s string) string {
	if c, ok := in.strings[s]; ok {
		return c
	}
	if len(in.strings) >= in.limit {
		in.strings = map[string]string{}
	}
	in.strings[s] = s
	return s
}

// Labels returns a map with the content of m, its strings interned: one
// shared with other cached objects of the same content when m is small, a
// copy of its own when it is too large to share; nil for an empty m.
func (in *Interner) Labels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if size > maxLen {
		return in.copyLocked(m)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	id := b.String()
	if shared, ok := in.maps[id]; ok {
		if maps.Equal(shared, m) {
			return shared
		}
		// Values may hold the separator: another content under the same
		// key is kept apart, not shared.
		return in.copyLocked(m)
	}
	if len(in.maps) >= in.limit {
		in.maps = map[string]map[string]string{}
	}
	in.maps[id] = in.copyLocked(m)
	return in.maps[id]
}

// copyLocked is a copy of m, its strings interned.
func (in *Interner) copyLocked(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[in.strLocked(k)] = in.strLocked(v)
	}
	return out
}
