package gc

import (
	"context"
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
// starts them once every source has synced) until the trigger kinds that
// the rules name at wrapup's start have listed, or are known not to be
// served or watchable, or failed a list, or for at most startGateMax.
//
// Without it, at a start with many AppWrappers every one of them is
// decided once while its trigger kind still lists, to no effect (it waits
// for its trigger, decision.VerdictWaitingForTrigger), and once more when
// the kind has listed: two reconciles for one completion, and the first
// pass takes the cores the kind's list needs. The AppWrappers' own events,
// and their triggers' from the kind's list, are queued meanwhile, each
// AppWrapper once; none is lost. The wait is bounded: a kind that lists
// for longer (a very large list) only brings back the pass to no effect.
// A kind whose list failed (a conversion webhook down,
// the API server refusing) is not waited for: the reflector tries again
// with its backoff, for as long as it takes; nor, past startGateUnclaimed,
// one whose informer has not started (the rule controller has not
// reconciled its rule, or discovery fails).
//
// The rule controller starts the kinds' informers (it claims a rule's
// kind when it reconciles the rule), on its own: it does not wait for
// this controller.
type triggersListed struct {
	// Rules reads the rules (the manager's cache).
	Rules client.Reader
	// Policies compiles them: a rule that does not compile claims no
	// kind.
	Policies *celpolicies.Cache
	// Kinds says how far a kind can be read (triggers.Watches).
	Kinds kindLister
	Log   logr.Logger
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// startGateMax bounds the wait for the trigger kinds at start: past it,
// AppWrappers are decided while their kinds list, as they would be
// without the wait. It is well under controller-runtime's CacheSyncTimeout
// (2 minutes), past which a source that has not synced stops the manager.
const startGateMax = 30 * time.Second

// startGateUnclaimed bounds the wait for a kind whose informer has not
// started.
const startGateUnclaimed = 10 * time.Second

// kindLister is what the wait reads of the trigger watches.
type kindLister interface {
	Kind(gk schema.GroupKind) decision.Kind
	// Listing says whether gk's informer runs and has not listed yet,
	// and whether a list of it failed meanwhile.
	Listing(gk schema.GroupKind) (listing, failed bool)
}

// startGatePoll is how often the wait looks at the kinds.
const startGatePoll = 50 * time.Millisecond

func (t *triggersListed) String() string { return "the trigger kinds the rules name, listed" }

// Start sends nothing.
func (t *triggersListed) Start(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return nil
}

// WaitForSync returns once every kind the rules name is no longer
// pending, or after startGateMax; never an error, which would stop the
// controller.
func (t *triggersListed) WaitForSync(ctx context.Context) error {
	clk := t.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	log := t.Log
	start := clk.Now()
	kinds, err := t.kinds(ctx)
	if err != nil {
		log.Info("Could not list the rules to wait for their trigger kinds; deciding at once", "err", err.Error())
		return nil
	}
	if len(kinds) == 0 {
		return nil
	}
	for {
		pending, unlisted := t.look(kinds, clk.Since(start) < startGateUnclaimed)
		if len(pending) == 0 {
			waited := clk.Since(start).Round(time.Millisecond).String()
			if len(unlisted) > 0 {
				// Failed a list, or not started past startGateUnclaimed.
				log.Info("Trigger kinds listed but some; deciding (AppWrappers whose kind lists wait for it)", "unlisted", unlisted, "kinds", len(kinds), "waited", waited)
				return nil
			}
			log.Info("Trigger kinds listed; deciding", "kinds", len(kinds), "waited", waited)
			return nil
		}
		if clk.Since(start) >= startGateMax {
			log.Info("Trigger kinds still listing; deciding meanwhile (AppWrappers whose kind lists wait for it)", "pending", pending, "waited", clk.Since(start).Round(time.Millisecond).String())
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(startGatePoll):
		}
	}
}

// kinds are the trigger kinds of the rules that compile and whose
// selectors parse: those the rule controller claims.
func (t *triggersListed) kinds(ctx context.Context) ([]schema.GroupKind, error) {
	var rules wrapupv1alpha1.CompletionRuleList
	if err := t.Rules.List(ctx, &rules); err != nil {
		return nil, err
	}
	seen := map[schema.GroupKind]bool{}
	var kinds []schema.GroupKind
	for i := range rules.Items {
		rule := &rules.Items[i]
		if rule.Spec.Trigger.Kind == "" || !rule.DeletionTimestamp.IsZero() || selectorsError(rule) != nil {
			continue
		}
		if _, err := t.Policies.Get(rule); err != nil {
			continue
		}
		if gk := decision.RuleKind(rule); !seen[gk] {
			seen[gk] = true
			kinds = append(kinds, gk)
		}
	}
	return kinds, nil
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
