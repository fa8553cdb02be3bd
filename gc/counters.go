package gc

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

const (
	// counterFlushDelay is how long increments gather before one status
	// write per rule carries them all: with several workers finishing
	// AppWrappers of one rule at once, a write per increment mostly
	// conflicts.
	counterFlushDelay = 500 * time.Millisecond
	// After a failed write, the increments it did not carry are written
	// again after counterRetryDelay, doubling on each failure up to
	// counterRetryMaxDelay.
	counterRetryDelay    = time.Second
	counterRetryMaxDelay = 30 * time.Second
)

// ruleCounters batches the rules' succeeded and failed counters into one
// optimistic-locked status update per rule and flush. A write that fails
// (the API server is unreachable or restarting, say) is tried again later
// with what it did not carry; increments not yet written when the process
// dies are lost, the outcome itself being already recorded on the
// AppWrapper by then.
type ruleCounters struct {
	Client    client.Client
	APIReader client.Reader
	// Log defaults to the logger of Start's context.
	Log logr.Logger

	incs chan counterInc
}

type counterInc struct {
	rule    string
	outcome wrapupv1alpha1.Outcome
}

type counterDelta struct{ succeeded, failed int64 }

// unsureWrite is a status write whose fate is unknown (it failed in a way
// that does not say whether the server applied it, such as a lost
// response): the counters it set and what it added, so that the next
// attempt can tell. ruleCounters is the only writer of the counters (the
// leader's), so the counters are equal to what the write set exactly when
// it was applied.
type unsureWrite struct{ set, added counterDelta }

// newRuleCounters returns counters that write through c, reading with r.
func newRuleCounters(c client.Client, r client.Reader) *ruleCounters {
	return &ruleCounters{Client: c, APIReader: r, incs: make(chan counterInc, 1024)}
}

// Add counts one outcome for rule.
func (rc *ruleCounters) Add(ctx context.Context, rule string, outcome wrapupv1alpha1.Outcome) {
	select {
	case rc.incs <- counterInc{rule: rule, outcome: outcome}:
	case <-ctx.Done():
	}
}

// NeedLeaderElection: only the acting replica counts.
func (rc *ruleCounters) NeedLeaderElection() bool { return true }

// Start gathers increments and flushes them until ctx ends, then flushes
// what is left.
func (rc *ruleCounters) Start(ctx context.Context) error {
	if rc.Log.GetSink() == nil {
		rc.Log = logf.FromContext(ctx)
	}
	pending := map[string]counterDelta{}
	unsure := map[string]unsureWrite{}
	var flush <-chan time.Time
	var retryDelay time.Duration
	for {
		select {
		case inc := <-rc.incs:
			d := pending[inc.rule]
			if inc.outcome == wrapupv1alpha1.OutcomeSucceeded {
				d.succeeded++
			} else {
				d.failed++
			}
			pending[inc.rule] = d
			if flush == nil {
				flush = time.After(counterFlushDelay)
			}
		case <-flush:
			flush = nil
			if rc.flush(ctx, pending, unsure) {
				retryDelay = 0
				continue
			}
			retryDelay = min(max(2*retryDelay, counterRetryDelay), counterRetryMaxDelay)
			flush = time.After(retryDelay)
		case <-ctx.Done():
			// The manager is stopping: a short, separate deadline to write
			// what was counted.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rc.flush(fctx, pending, unsure)
			cancel()
			return nil
		}
	}
}

// flush writes the pending increments of every rule, and settles the
// unsure writes; what it could not write stays in pending and unsure. It
// reports whether nothing is left.
func (rc *ruleCounters) flush(ctx context.Context, pending map[string]counterDelta, unsure map[string]unsureWrite) bool {
	names := slices.Collect(maps.Keys(pending))
	for name := range unsure {
		if _, ok := pending[name]; !ok {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if err := rc.write(ctx, name, pending, unsure); err != nil {
			rc.Log.Error(err, "Updating rule counters; trying again later", "rule", name)
		}
	}
	return len(pending) == 0 && len(unsure) == 0
}

func (rc *ruleCounters) write(ctx context.Context, name string, pending map[string]counterDelta, unsure map[string]unsureWrite) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rule := &wrapupv1alpha1.CompletionRule{}
		if err := rc.APIReader.Get(ctx, types.NamespacedName{Name: name}, rule); err != nil {
			if apierrors.IsNotFound(err) {
				// The rule is gone, and its counters with it.
				delete(pending, name)
				delete(unsure, name)
				return nil
			}
			return err
		}
		add := pending[name]
		if u, ok := unsure[name]; ok && (rule.Status.Succeeded != u.set.succeeded || rule.Status.Failed != u.set.failed) {
			// The unsure write was not applied: add its increments again.
			add.succeeded += u.added.succeeded
			add.failed += u.added.failed
		}
		if add == (counterDelta{}) {
			delete(pending, name)
			delete(unsure, name)
			return nil
		}
		set := counterDelta{succeeded: rule.Status.Succeeded + add.succeeded, failed: rule.Status.Failed + add.failed}
		rule.Status.Succeeded, rule.Status.Failed = set.succeeded, set.failed
		err := rc.Client.Status().Update(ctx, rule)
		switch {
		case err == nil:
			delete(pending, name)
			delete(unsure, name)
		case !rejected(err):
			// Perhaps applied: the next attempt tells from the counters.
			delete(pending, name)
			unsure[name] = unsureWrite{set: set, added: add}
		}
		// A rejected write changed nothing: pending and unsure stay as
		// they were for the next attempt.
		return err
	})
}

// rejected says whether err shows that the server did not apply a write:
// it never reached the server, or the server refused it (a 4xx status:
// conflict, throttling, forbidden...). A timeout, a 5xx or a lost
// connection leave it unknown.
func rejected(err error) bool {
	if utilnet.IsConnectionRefused(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 400 && code < 500 && code != http.StatusRequestTimeout
	}
	return false
}
