package intern

import (
	"maps"
	"testing"
)

// TestInternerSharesOnlyEqualSets: sets of the same content share one map;
// a set whose values hold the key's separator is not taken for another.
func TestInternerSharesOnlyEqualSets(t *testing.T) {
	in := New(Limit)
	a := in.Labels(map[string]string{"team": "a", "wrapup.dev/trigger": "true"})
	b := in.Labels(map[string]string{"wrapup.dev/trigger": "true", "team": "a"})
	if !maps.Equal(a, b) || len(a) != 2 {
		t.Fatalf("got %v and %v", a, b)
	}
	a["probe"] = "x" // the same map: a change shows in b
	if b["probe"] != "x" {
		t.Error("two equal sets are not shared")
	}
	delete(a, "probe")
	crafted := map[string]string{"team": "a\x00wrapup.dev/trigger\x00true"}
	if got := in.Labels(crafted); !maps.Equal(got, crafted) {
		t.Errorf("crafted set kept as %q", got)
	}
	victim := map[string]string{"team": "a", "wrapup.dev/trigger": "true"}
	in2 := New(Limit)
	in2.Labels(crafted)
	if got := in2.Labels(victim); !maps.Equal(got, victim) {
		t.Errorf("a set whose content collides with another's key was kept as %q", got)
	}
	if got := in.Labels(nil); got != nil {
		t.Errorf("empty set kept as %v", got)
	}
	small := New(2)
	for _, v := range []string{"1", "2", "3", "4"} {
		if got := small.Labels(map[string]string{"k": v}); got["k"] != v {
			t.Errorf("past the limit: %v", got)
		}
	}
	if len(small.maps) > 2 || len(small.strings) > 2 {
		t.Errorf("the Interner holds %d sets and %d strings past its limit of 2", len(small.maps), len(small.strings))
	}
}
