package gc

import (
	"context"
	"errors"
	"net/http"
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

// ruleTally is what is left to write of a rule's counters: the pending
// increments, and, when the last status write's fate is unknown (it failed
// in a way that does not say whether the server applied it, such as a lost
// response), the counters it set and what it added, so that the next
// attempt can tell. ruleCounters is the only writer of the counters (the
// leader's), so the counters are equal to what the write set exactly when
// it was applied.
type ruleTally struct {
	pending    counterDelta
	unsure     bool
	set, added counterDelta
}

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
	tallies := map[string]ruleTally{}
	var flush <-chan time.Time
	var retryDelay time.Duration
	for {
		select {
		case inc := <-rc.incs:
			t := tallies[inc.rule]
			if inc.outcome == wrapupv1alpha1.OutcomeSucceeded {
				t.pending.succeeded++
			} else {
				t.pending.failed++
			}
			tallies[inc.rule] = t
			if flush == nil {
				flush = time.After(counterFlushDelay)
			}
		case <-flush:
			flush = nil
			if rc.flush(ctx, tallies) {
				retryDelay = 0
				continue
			}
			retryDelay = min(max(2*retryDelay, counterRetryDelay), counterRetryMaxDelay)
			flush = time.After(retryDelay)
		case <-ctx.Done():
			// The manager is stopping: a short, separate deadline to write
			// what was counted.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rc.flush(fctx, tallies)
			cancel()
			return nil
		}
	}
}

// flush writes the tallies of every rule; what it could not write stays in
// tallies. It reports whether nothing is left.
func (rc *ruleCounters) flush(ctx context.Context, tallies map[string]ruleTally) bool {
	for name := range tallies {
		// write changes the tally of name alone.
		if err := rc.write(ctx, name, tallies); err != nil {
			rc.Log.Error(err, "Updating rule counters; trying again later", "rule", name)
		}
	}
	return len(tallies) == 0
}

func (rc *ruleCounters) write(ctx context.Context, name string, tallies map[string]ruleTally) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rule := &wrapupv1alpha1.CompletionRule{}
		if err := rc.APIReader.Get(ctx, types.NamespacedName{Name: name}, rule); err != nil {
			if apierrors.IsNotFound(err) {
				// The rule is gone, and its counters with it.
				delete(tallies, name)
				return nil
			}
			return err
		}
		t := tallies[name]
		add := t.pending
		if t.unsure && (rule.Status.Succeeded != t.set.succeeded || rule.Status.Failed != t.set.failed) {
			// The unsure write was not applied: add its increments again.
			add.succeeded += t.added.succeeded
			add.failed += t.added.failed
		}
		if add == (counterDelta{}) {
			delete(tallies, name)
			return nil
		}
		set := counterDelta{succeeded: rule.Status.Succeeded + add.succeeded, failed: rule.Status.Failed + add.failed}
		rule.Status.Succeeded, rule.Status.Failed = set.succeeded, set.failed
		err := rc.Client.Status().Update(ctx, rule)
		switch {
		case err == nil:
			delete(tallies, name)
		case !rejected(err):
			// Perhaps applied: the next attempt tells from the counters.
			tallies[name] = ruleTally{unsure: true, set: set, added: add}
		}
		// A rejected write changed nothing: the tally stays as it was for
		// the next attempt.
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
