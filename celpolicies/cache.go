package celpolicies

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Cache holds the compiled Policy of each CompletionRule, so that a rule is
// compiled once per generation rather than on every reconcile. Compile
// errors are cached too: a broken rule stays broken until it is edited,
// which bumps its generation. The zero value is ready to use and safe for
// concurrent use.
type Cache struct {
	// Options are used for every compilation; set them before first use.
	Options CompileOptions

	mu      sync.RWMutex
	entries map[types.UID]cacheEntry
}

// cacheEntry is stored by value so that a hit copies it without allocating.
type cacheEntry struct {
	generation int64
	policy     *Policy
	err        error
}

// Get returns the compiled policy of rule, compiling it if the cache has no
// entry for the rule's UID or one for another generation. It returns the
// cached *CompileError for a rule that does not compile. A rule with no
// UID (read from a file, never stored by an API server) is compiled and
// not cached: nothing tells two of them apart.
func (c *Cache) Get(rule *v1alpha1.CompletionRule) (*Policy, error) {
	if rule == nil {
		return nil, errors.New("compiling expressions: nil rule")
	}
	uid, gen := rule.UID, rule.Generation
	if uid == "" {
		return CompileWithOptions(&rule.Spec, c.Options)
	}
	c.mu.RLock()
	e, ok := c.entries[uid]
	c.mu.RUnlock()
	if ok && e.generation == gen {
		return e.policy, e.err
	}

	// Compile outside the lock: hits for other rules must not wait for it.
	// Two concurrent misses for one rule may both compile; both results are
	// equivalent and the first stored wins.
	p, err := CompileWithOptions(&rule.Spec, c.Options)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[types.UID]cacheEntry)
	}
	if cur, ok := c.entries[uid]; ok {
		if cur.generation == gen {
			return cur.policy, cur.err
		}
		if cur.generation > gen {
			// A newer generation was stored meanwhile (this caller read a
			// stale rule); keep it, but answer for the rule asked about.
			return p, err
		}
	}
	c.entries[uid] = cacheEntry{generation: gen, policy: p, err: err}
	return p, err
}

// Forget drops the entry of a deleted rule.
func (c *Cache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, uid)
}

// Len returns the number of cached rules.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
