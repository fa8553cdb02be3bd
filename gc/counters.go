package gc

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// counterFlushDelay is how long increments gather before one status write
// per rule carries them all: with several workers finishing AppWrappers of
// one rule at once, a write per increment mostly conflicts.
const counterFlushDelay = 500 * time.Millisecond

// RuleCounters batches the rules' succeeded and failed counters into one
// optimistic-locked status update per rule and flush. Increments not yet
// written when the process dies are lost; the outcome itself is already
// recorded on the AppWrapper by then.
type RuleCounters struct {
	Client    client.Client
	APIReader client.Reader

	incs chan counterInc
}

type counterInc struct {
	rule    string
	outcome wrapupv1alpha1.Outcome
}

type counterDelta struct{ succeeded, failed int64 }

// NewRuleCounters returns counters that write through c, reading with r.
func NewRuleCounters(c client.Client, r client.Reader) *RuleCounters {
	return &RuleCounters{Client: c, APIReader: r, incs: make(chan counterInc, 1024)}
}

// Add counts one outcome for rule.
func (rc *RuleCounters) Add(ctx context.Context, rule string, outcome wrapupv1alpha1.Outcome) {
	select {
	case rc.incs <- counterInc{rule: rule, outcome: outcome}:
	case <-ctx.Done():
	}
}

// NeedLeaderElection: only the acting replica counts.
func (rc *RuleCounters) NeedLeaderElection() bool { return true }

// Start gathers increments and flushes them until ctx ends, then flushes
// what is left.
func (rc *RuleCounters) Start(ctx context.Context) error {
	pending := map[string]*counterDelta{}
	var flush <-chan time.Time
	for {
		select {
		case inc := <-rc.incs:
			d := pending[inc.rule]
			if d == nil {
				d = &counterDelta{}
				pending[inc.rule] = d
			}
			if inc.outcome == wrapupv1alpha1.OutcomeSucceeded {
				d.succeeded++
			} else {
				d.failed++
			}
			if flush == nil {
				flush = time.After(counterFlushDelay)
			}
		case <-flush:
			rc.flush(ctx, pending)
			pending = map[string]*counterDelta{}
			flush = nil
		case <-ctx.Done():
			// The manager is stopping: a short, separate deadline to write
			// what was counted.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rc.flush(fctx, pending)
			cancel()
			return nil
		}
	}
}

func (rc *RuleCounters) flush(ctx context.Context, pending map[string]*counterDelta) {
	for name, d := range pending {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rule := &wrapupv1alpha1.CompletionRule{}
			if err := rc.APIReader.Get(ctx, types.NamespacedName{Name: name}, rule); err != nil {
				return client.IgnoreNotFound(err)
			}
			rule.Status.Succeeded += d.succeeded
			rule.Status.Failed += d.failed
			return rc.Client.Status().Update(ctx, rule)
		})
		if err != nil {
			logf.FromContext(ctx).Error(err, "Updating rule counters", "rule", name)
		}
	}
}
