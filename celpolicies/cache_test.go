package celpolicies

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

func rule(uid types.UID, generation int64, success string) *v1alpha1.CompletionRule {
	return &v1alpha1.CompletionRule{
		ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid, Generation: generation},
		Spec:       v1alpha1.CompletionRuleSpec{Success: success},
	}
}

func TestCacheGet(t *testing.T) {
	var c Cache
	p1, err := c.Get(rule("a", 1, "true"))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	tests := []struct {
		name      string
		input     *v1alpha1.CompletionRule
		wantSame  bool // the policy of generation 1
		wantErr   bool
		wantLen   int
		wantValue Outcome
	}{
		{name: "hit", input: rule("a", 1, "true"), wantSame: true, wantLen: 1, wantValue: OutcomeSucceeded},
		{name: "hit ignores the spec: the generation says it is unchanged", input: rule("a", 1, "false"), wantSame: true, wantLen: 1, wantValue: OutcomeSucceeded},
		{name: "new generation recompiles", input: rule("a", 2, "false"), wantLen: 1, wantValue: OutcomeRunning},
		{name: "another rule", input: rule("b", 1, "true"), wantLen: 2, wantValue: OutcomeSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := c.Get(tc.input)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Get: err = %v, wantErr %v", err, tc.wantErr)
			}
			if (p == p1) != tc.wantSame {
				t.Errorf("same policy = %v, want %v", p == p1, tc.wantSame)
			}
			if c.Len() != tc.wantLen {
				t.Errorf("Len = %d, want %d", c.Len(), tc.wantLen)
			}
			got, err := p.Evaluate(context.Background(), gkUnknown, nil, nil)
			if err != nil || got.Outcome != tc.wantValue {
				t.Errorf("Evaluate = %s, %v, want %s", got.Outcome, err, tc.wantValue)
			}
		})
	}
}

func TestCacheStaleGenerationDoesNotReplaceNewer(t *testing.T) {
	var c Cache
	newer, err := c.Get(rule("a", 3, "true"))
	if err != nil {
		t.Fatal(err)
	}
	stale, err := c.Get(rule("a", 2, "false"))
	if err != nil {
		t.Fatal(err)
	}
	if stale == newer {
		t.Errorf("a stale rule got the newer generation's policy")
	}
	if again, _ := c.Get(rule("a", 3, "true")); again != newer {
		t.Errorf("the stale generation replaced the newer one")
	}
}

func TestCacheCompileErrorCached(t *testing.T) {
	var c Cache
	p, err1 := c.Get(rule("bad", 1, "object.("))
	var ce *CompileError
	if p != nil || !errors.As(err1, &ce) {
		t.Fatalf("Get = %v, %v, want a *CompileError", p, err1)
	}
	_, err2 := c.Get(rule("bad", 1, "object.("))
	if err2 != err1 {
		t.Errorf("second Get returned a new error: the rule was compiled again")
	}
	fixed, err := c.Get(rule("bad", 2, "true"))
	if err != nil || fixed == nil {
		t.Errorf("Get after the fix = %v, %v, want a policy", fixed, err)
	}
}

func TestCacheForget(t *testing.T) {
	var c Cache
	p1, _ := c.Get(rule("a", 1, "true"))
	_, _ = c.Get(rule("b", 1, "true"))
	c.Forget("a")
	c.Forget("never-seen")
	if c.Len() != 1 {
		t.Errorf("Len after Forget = %d, want 1", c.Len())
	}
	p2, _ := c.Get(rule("a", 1, "true"))
	if p2 == p1 {
		t.Errorf("Get after Forget returned the forgotten policy")
	}
}

func TestCacheNilRule(t *testing.T) {
	var c Cache
	if _, err := c.Get(nil); err == nil {
		t.Errorf("Get(nil) returned no error")
	}
}

func TestCacheOptions(t *testing.T) {
	c := Cache{Options: CompileOptions{MaxEstimatedCost: 10}}
	if _, err := c.Get(rule("a", 1, "object.items.all(x, x > 0)")); err == nil {
		t.Errorf("Get ignored CompileOptions")
	}
}

// TestCacheHitDoesNotAllocate guards the reconciler's hot path.
func TestCacheHitDoesNotAllocate(t *testing.T) {
	var c Cache
	r := rule("a", 1, "true")
	if _, err := c.Get(r); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(1000, func() { _, _ = c.Get(r) }); allocs != 0 {
		t.Errorf("a cache hit allocates %v times", allocs)
	}
}

// TestCacheConcurrent is meant for -race: readers, writers of new
// generations and Forget on a shared cache.
func TestCacheConcurrent(t *testing.T) {
	var c Cache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				uid := uidN(i % 4)
				gen := int64(1 + (i/10+g)%3)
				p, err := c.Get(rule(uid, gen, fmt.Sprintf("object.status.?generation.orValue(0) == %d", gen)))
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				got, err := p.Evaluate(context.Background(), gkUnknown, map[string]any{"status": map[string]any{"generation": gen}}, nil)
				if err != nil || got.Outcome != OutcomeSucceeded {
					t.Errorf("policy for generation %d: %s, %v", gen, got.Outcome, err)
					return
				}
				if i%37 == 0 {
					c.Forget(uid)
				}
				_ = c.Len()
			}
		}()
	}
	wg.Wait()
}

func uidN(i int) types.UID { return types.UID(fmt.Sprintf("rule-%d", i)) }

// Rules with no UID (read from files, as a tool's plan reads new rules)
// are never taken for one another: each is compiled on its own.
func TestCacheRulesWithoutUID(t *testing.T) {
	var c Cache
	a, err := c.Get(rule("", 1, "true"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Get(rule("", 1, "false"))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two rules with no UID share one compiled policy")
	}
	if len(c.entries) != 0 {
		t.Fatalf("%d entries cached for rules with no UID", len(c.entries))
	}
}
