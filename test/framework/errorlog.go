package framework

import (
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrorLog records the errors the controllers log, so that a suite can fail
// on the ones that must not happen, as Kueue's test framework fails on write
// conflicts: a controller that writes on stale reads shows up as errors
// that nothing else would notice.
//
// A deliberate outage of the API server (Framework.StopAPIServer) makes
// every controller log errors until it is back: those are recorded apart,
// and no check looks at them.
type ErrorLog struct {
	mu      sync.Mutex
	entries []string
	// outage is set while the API server is down on purpose.
	outage       bool
	duringOutage []string
}

// Conflicts returns the logged errors that are write conflicts and contain
// substr (a controller name, say).
func (l *ErrorLog) Conflicts(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.entries {
		if !strings.Contains(e, substr) {
			continue
		}
		if strings.Contains(e, "the object has been modified") || strings.Contains(e, "Operation cannot be fulfilled") {
			out = append(out, e)
		}
	}
	return out
}

// Mark returns a position in the log, for Since.
func (l *ErrorLog) Mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Since returns the errors logged after mark (see Mark), outside any
// outage of the API server, by the logger named logger or one named under
// it ("wrapup" covers "wrapup/events").
func (l *ErrorLog) Since(mark int, logger string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.entries[min(mark, len(l.entries)):] {
		if strings.HasPrefix(e, logger+": ") || strings.HasPrefix(e, logger+"/") {
			out = append(out, e)
		}
	}
	return out
}

// DuringOutage returns the errors logged while the API server was down on
// purpose, which the checks ignore.
func (l *ErrorLog) DuringOutage() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.duringOutage...)
}

// Reset forgets what was recorded.
func (l *ErrorLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
	l.duringOutage = nil
}

func (l *ErrorLog) beginOutage() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outage = true
}

func (l *ErrorLog) endOutage() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outage = false
}

func (l *ErrorLog) record(name string, err error, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	conflict := ""
	if apierrors.IsConflict(err) {
		conflict = " (conflict)"
	}
	entry := fmt.Sprintf("%s: %s: %v%s %v", name, msg, err, conflict, kv)
	if l.outage {
		l.duringOutage = append(l.duringOutage, entry)
		return
	}
	l.entries = append(l.entries, entry)
}

// recordingSink passes every log line on and records errors.
type recordingSink struct {
	logr.LogSink
	log  *ErrorLog
	name string
	kv   []any
}

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	s.log.record(s.name, err, msg, append(append([]any{}, s.kv...), kv...))
	s.LogSink.Error(err, msg, kv...)
}

func (s *recordingSink) WithValues(kv ...any) logr.LogSink {
	return &recordingSink{LogSink: s.LogSink.WithValues(kv...), log: s.log, name: s.name, kv: append(append([]any{}, s.kv...), kv...)}
}

func (s *recordingSink) WithName(name string) logr.LogSink {
	n := name
	if s.name != "" {
		n = s.name + "/" + name
	}
	return &recordingSink{LogSink: s.LogSink.WithName(name), log: s.log, name: n, kv: s.kv}
}
