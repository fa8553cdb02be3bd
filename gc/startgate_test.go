package gc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// kindStates are the trigger kinds' states as a test sets them.
type kindStates struct {
	mu     sync.Mutex
	states map[schema.GroupKind]decision.KindState
}

func (k *kindStates) set(gk schema.GroupKind, s decision.KindState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.states[gk] = s
}

func (k *kindStates) Kind(gk schema.GroupKind) decision.Kind {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.states[gk]; ok {
		return decision.Kind{State: s}
	}
	return decision.Kind{State: decision.KindPending}
}

// TestStartWaitsForTheRulesTriggerKinds: the AppWrapper controller's
// workers start once the kinds the rules name have listed, or are known
// not to be served; the kinds of rules that claim none (one that does not
// compile, one whose selector does not parse, one with no kind) are not
// waited for; and the wait ends at startGateMax whatever the kinds.
func TestStartWaitsForTheRulesTriggerKinds(t *testing.T) {
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	run := schema.GroupKind{Group: "example.com", Kind: "Run"}
	c := historyBed(t)
	ctx := context.Background()
	for _, r := range []*util.RuleWrapper{
		util.MakeRule("jobs").TriggerKind("batch", "Job", ""),
		util.MakeRule("jobs-too").TriggerKind("batch", "Job", "").Priority(2),
		util.MakeRule("runs").TriggerKind("example.com", "Run", ""),
		util.MakeRule("broken").TriggerKind("example.com", "Broken", "").Success("object.status.("),
		util.MakeRule("bad-selector").TriggerKind("example.com", "BadSelector", "").NamespaceLabels(map[string]string{"a b": "c"}),
		util.MakeRule("annotated"),
	} {
		if err := c.Create(ctx, r.UID(types.UID("uid-"+r.Name)).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	kinds := &kindStates{states: map[schema.GroupKind]decision.KindState{}}
	clk := clocktesting.NewFakeClock(time.Now())
	gate := &triggersListed{Rules: c, Policies: &celpolicies.Cache{}, Kind: kinds.Kind, Log: testr.New(t), Clock: clk}

	done := make(chan error, 1)
	go func() { done <- gate.WaitForSync(ctx) }()
	step := func() {
		t.Helper()
		for !clk.HasWaiters() {
			select {
			case err := <-done:
				t.Fatalf("the wait ended (%v) with Job %v and Run %v", err, kinds.Kind(job).State, kinds.Kind(run).State)
			default:
				time.Sleep(time.Millisecond)
			}
		}
		clk.Step(startGatePoll)
	}
	step()
	kinds.set(job, decision.KindWatched)
	step()
	step()
	kinds.set(run, decision.KindNotServed)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait went on once every kind the rules name had listed or was not served")
	}

	kinds.set(job, decision.KindPending)
	start := clk.Now()
	go func() { done <- gate.WaitForSync(ctx) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if waited := clk.Since(start); waited < startGateMax {
				t.Fatalf("with Job still listing, the wait ended after %v, before startGateMax", waited)
			}
			return
		default:
		}
		if clk.Since(start) > startGateMax+time.Second {
			t.Fatalf("with Job still listing, the wait went on past startGateMax")
		}
		if clk.HasWaiters() {
			clk.Step(startGatePoll)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}
