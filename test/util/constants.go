// Package util holds the named waits, builders and status helpers that
// wrapup's suites share.
package util

import "time"

const (
	// Timeout bounds a wait for something the controllers do in reaction to
	// a change.
	Timeout = 30 * time.Second
	// LongTimeout bounds waits that include a garbage-collection cascade or a
	// TTL.
	LongTimeout = 60 * time.Second
	// Interval is how often a wait polls.
	Interval = 100 * time.Millisecond
	// ConsistentDuration is how long "nothing happens" is watched.
	ConsistentDuration = 3 * time.Second
)
