package gc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// kindStates are the trigger kinds' states as a test sets them: a kind
// not set has no informer.
type kindStates struct {
	mu     sync.Mutex
	states map[schema.GroupKind]decision.KindState
	// listing are the kinds whose informer lists; true if a list failed.
	listing map[schema.GroupKind]bool
}

func (k *kindStates) set(gk schema.GroupKind, s decision.KindState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.states[gk] = s
	delete(k.listing, gk)
}

// list starts gk's informer; failed says whether a list of it failed.
func (k *kindStates) list(gk schema.GroupKind, failed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.states, gk)
	k.listing[gk] = failed
}

func (k *kindStates) Listing(gk schema.GroupKind) (bool, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	failed, ok := k.listing[gk]
	return ok, failed
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
// waited for; nor a kind a list of which failed, nor one whose informer
// has not started past startGateUnclaimed; and the wait ends at
// startGateMax whatever the kinds.
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
	kinds := &kindStates{states: map[schema.GroupKind]decision.KindState{}, listing: map[schema.GroupKind]bool{}}
	clk := clocktesting.NewFakeClock(time.Now())
	gate := &triggersListed{Rules: c, Policies: &celpolicies.Cache{}, Kinds: kinds, Log: testr.New(t), Clock: clk}

	done := make(chan error, 1)
	go func() { done <- gate.WaitForSync(ctx) }()
	g := gomega.NewWithT(t)
	// next waits until the wait either waits on the clock (false) or has
	// ended (true).
	next := func() bool {
		t.Helper()
		over := false
		g.Eventually(func() bool {
			select {
			case err := <-done:
				g.Expect(err).NotTo(gomega.HaveOccurred())
				over = true
				return true
			default:
				return clk.HasWaiters()
			}
		}, 10*time.Second, time.Millisecond).Should(gomega.BeTrue())
		return over
	}
	step := func() {
		t.Helper()
		if next() {
			t.Fatalf("the wait ended with Job %v and Run %v", kinds.Kind(job).State, kinds.Kind(run).State)
		}
		clk.Step(startGatePoll)
	}
	// ended waits for the wait to end, by itself.
	ended := func(why string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the wait went on once %s", why)
		}
	}
	kinds.list(job, false)
	kinds.list(run, false)
	step()
	kinds.set(job, decision.KindWatched)
	step()
	step()
	kinds.set(run, decision.KindNotServed)
	ended("every kind the rules name had listed or was not served")

	// A list of Run failed: Job is still waited for, Run not.
	kinds.list(job, false)
	kinds.list(run, true)
	go func() { done <- gate.WaitForSync(ctx) }()
	step()
	step()
	kinds.set(job, decision.KindWatched)
	ended("Job had listed, and a list of Run had failed")

	// Run's informer has not started (its rule not reconciled yet, or
	// discovery failing): it is waited for until startGateUnclaimed.
	kinds.set(run, decision.KindPending)
	start := clk.Now()
	go func() { done <- gate.WaitForSync(ctx) }()
	for clk.Since(start) < startGateUnclaimed {
		step()
	}
	ended("startGateUnclaimed had passed with Run's informer not started")

	kinds.list(job, false)
	start = clk.Now()
	go func() { done <- gate.WaitForSync(ctx) }()
	for !next() {
		if clk.Since(start) > startGateMax+time.Second {
			t.Fatalf("with Job still listing, the wait went on past startGateMax")
		}
		clk.Step(startGatePoll)
	}
	if waited := clk.Since(start); waited < startGateMax {
		t.Fatalf("with Job still listing, the wait ended after %v, before startGateMax", waited)
	}
}
