package main

import (
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// quietRotator logs as information, not as errors, what the webhook's
// certificate rotator (cert-controller's "cert-rotation" logger) reports
// of a fresh start: its two writers of the Secret (the first rotation and
// the Secret's reconciler) race, one gets a conflict, and the rotator tries
// again (refreshCertIfNeeded's backoff); the reconciler sees the Secret as
// installed, with no certificate in it yet, before the first rotation fills
// it (ReconcileWH.Reconcile, "secret is not well-formed"; cert-controller
// v0.16.0 pkg/rotator/rotator.go). An admin alerting on error lines would
// otherwise be paged at every install. Every other error stays one.
type quietRotator struct {
	logr.LogSink
	name string
}

func quieten(l logr.Logger) logr.Logger {
	return logr.New(quietRotator{LogSink: l.GetSink()})
}

// Init does nothing: the sink it wraps was initialized by its own logger.
func (s quietRotator) Init(logr.RuntimeInfo) {}

// deeper is the wrapped sink, one frame deeper: Error's own.
func (s quietRotator) deeper() logr.LogSink {
	if c, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return c.WithCallDepth(1)
	}
	return s.LogSink
}

func (s quietRotator) rotator() bool { return strings.HasPrefix(s.name, "cert-rotation") }

func (s quietRotator) Error(err error, msg string, kv ...any) {
	withErr := func() []any { return append(append([]any{}, kv...), "error", err.Error()) }
	switch {
	case s.rotator() && apierrors.IsConflict(err):
		s.deeper().Info(0, msg+"; trying again (a conflicting write of the Secret)", withErr()...)
		return
	case s.rotator() && err != nil && strings.Contains(err.Error(), "not well-formed, missing"):
		// The Secret as installed, empty, before the first rotation
		// fills it (the rotator's Secret reconciler sees it first).
		s.deeper().Info(0, msg+"; the rotator fills it", withErr()...)
		return
	}
	s.deeper().Error(err, msg, kv...)
}

func (s quietRotator) WithName(name string) logr.LogSink {
	full := name
	if s.name != "" {
		full = s.name + "." + name
	}
	return quietRotator{LogSink: s.LogSink.WithName(name), name: full}
}

func (s quietRotator) WithValues(kv ...any) logr.LogSink {
	return quietRotator{LogSink: s.LogSink.WithValues(kv...), name: s.name}
}

func (s quietRotator) WithCallDepth(depth int) logr.LogSink {
	if c, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return quietRotator{LogSink: c.WithCallDepth(depth), name: s.name}
	}
	return s
}
