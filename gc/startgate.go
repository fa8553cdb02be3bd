package gc

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// triggersListed is a source of the AppWrapper controller that sends
// nothing: its WaitForSync holds the controller's workers (controller-runtime
// starts them once every source has synced) until the trigger kinds the
// rules name at wrapup's start have listed, or are known not to be served
// or watchable, or for at most startGateMax: so that at a start with many
// AppWrappers each is decided once on its trigger, not once more before,
// to no effect (decision.VerdictWaitingForTrigger), taking the cores the
// kind's list needs (docs/benchmarks.md). Events meanwhile are queued, each
// AppWrapper once, none lost. Not waited for: a kind whose list failed (a
// conversion webhook down, the API server refusing), which its reflector
// lists again with backoff for as long as it takes; nor, past
// startGateUnclaimed, one whose informer has not started (the rule
// controller, which starts the informers and does not wait for this one,
// has not reconciled its rule, or discovery fails).
type triggersListed struct {
	Rules    client.Reader      // the manager's cache
	Policies *celpolicies.Cache // a rule that does not compile claims no kind
	Kinds    kindLister         // triggers.Watches
	Log      logr.Logger
	Clock    clock.Clock // defaults to the real clock
}

// startGateMax bounds the wait: past it, AppWrappers are decided while
// their kinds list, as without the wait. It is well under
// controller-runtime's CacheSyncTimeout (2 minutes), past which a source
// that has not synced stops the manager.
const (
	startGateMax       = 30 * time.Second
	startGateUnclaimed = 10 * time.Second      // bounds the wait for a kind whose informer has not started
	startGatePoll      = 50 * time.Millisecond // how often the wait looks at the kinds
)

// kindLister is what the wait reads of the trigger watches.
type kindLister interface {
	Kind(gk schema.GroupKind) decision.Kind
	// Listing says whether gk's informer runs and has not listed yet,
	// and whether a list of it failed meanwhile.
	Listing(gk schema.GroupKind) (listing, failed bool)
}

// String names the source.
func (t *triggersListed) String() string { return "the trigger kinds the rules name, listed" }

// Start sends nothing.
func (t *triggersListed) Start(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return nil
}

// WaitForSync returns once every kind the rules name is no longer
// pending, or after startGateMax; never an error, which would stop the
// controller.
func (t *triggersListed) WaitForSync(ctx context.Context) error {
	clk := cmp.Or[clock.Clock](t.Clock, clock.RealClock{})
	start := clk.Now()
	var rules wrapupv1alpha1.CompletionRuleList
	if err := t.Rules.List(ctx, &rules); err != nil {
		t.Log.Info("Could not list the rules to wait for their trigger kinds; deciding at once", "err", err.Error())
		return nil
	}
	// The kinds the rule controller claims: those of the rules that compile
	// and whose selectors parse.
	var kinds []schema.GroupKind
	for i := range rules.Items {
		rule := &rules.Items[i]
		if rule.Spec.Trigger.Kind == "" || !rule.DeletionTimestamp.IsZero() || selectorsError(rule) != nil {
			continue
		}
		if _, err := t.Policies.Get(rule); err == nil && !slices.Contains(kinds, decision.RuleKind(rule)) {
			kinds = append(kinds, decision.RuleKind(rule))
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	pending, unlisted := t.look(kinds, clk.Since(start) < startGateUnclaimed)
	for len(pending) > 0 && clk.Since(start) < startGateMax {
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(startGatePoll):
		}
		pending, unlisted = t.look(kinds, clk.Since(start) < startGateUnclaimed)
	}
	waited := clk.Since(start).Round(time.Millisecond).String()
	switch {
	case len(pending) > 0:
		t.Log.Info("Trigger kinds still listing; deciding meanwhile (AppWrappers whose kind lists wait for it)", "pending", pending, "waited", waited)
	case len(unlisted) > 0: // failed a list, or not started past startGateUnclaimed
		t.Log.Info("Trigger kinds listed but some; deciding (AppWrappers whose kind lists wait for it)", "unlisted", unlisted, "kinds", len(kinds), "waited", waited)
	default:
		t.Log.Info("Trigger kinds listed; deciding", "kinds", len(kinds), "waited", waited)
	}
	return nil
}

// look says which of kinds have not listed (unlisted), and which of
// those to wait for (pending): listing, with no list failed, or, while
// unclaimed is true, whose informer has not started.
func (t *triggersListed) look(kinds []schema.GroupKind, unclaimed bool) (pending, unlisted []string) {
	for _, gk := range kinds {
		if t.Kinds.Kind(gk).State != decision.KindPending {
			continue
		}
		unlisted = append(unlisted, gk.String())
		if listing, failed := t.Kinds.Listing(gk); listing && !failed || !listing && unclaimed {
			pending = append(pending, gk.String())
		}
	}
	return pending, unlisted
}
