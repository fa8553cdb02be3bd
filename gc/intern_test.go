package gc

import (
	"context"
	"maps"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/view"
)

// TestInternerSharesOnlyEqualSets: sets of the same content share one map;
// a set whose values hold the key's separator is not taken for another.
func TestInternerSharesOnlyEqualSets(t *testing.T) {
	in := newInterner(internLimit)
	a := in.labels(map[string]string{"team": "a", "wrapup.dev/trigger": "true"})
	b := in.labels(map[string]string{"wrapup.dev/trigger": "true", "team": "a"})
	if !maps.Equal(a, b) || len(a) != 2 {
		t.Fatalf("got %v and %v", a, b)
	}
	a["probe"] = "x" // the same map: a change shows in b
	if b["probe"] != "x" {
		t.Error("two equal sets are not shared")
	}
	delete(a, "probe")
	crafted := map[string]string{"team": "a\x00wrapup.dev/trigger\x00true"}
	if got := in.labels(crafted); !maps.Equal(got, crafted) {
		t.Errorf("crafted set kept as %q", got)
	}
	victim := map[string]string{"team": "a", "wrapup.dev/trigger": "true"}
	in2 := newInterner(internLimit)
	in2.labels(crafted)
	if got := in2.labels(victim); !maps.Equal(got, victim) {
		t.Errorf("a set whose content collides with another's key was kept as %q", got)
	}
	if got := in.labels(nil); got != nil {
		t.Errorf("empty set kept as %v", got)
	}
	small := newInterner(2)
	for _, v := range []string{"1", "2", "3", "4"} {
		if got := small.labels(map[string]string{"k": v}); got["k"] != v {
			t.Errorf("past the limit: %v", got)
		}
	}
	if len(small.maps) > 2 || len(small.strings) > 2 {
		t.Errorf("the interner holds %d sets and %d strings past its limit of 2", len(small.maps), len(small.strings))
	}
}

// countingReader answers every Get with live and counts the Gets.
type countingReader struct {
	client.Reader
	live *awv1beta2.AppWrapper
	gets int
}

func (r *countingReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	r.live.DeepCopyInto(obj.(*awv1beta2.AppWrapper))
	return nil
}

// TestAppWrapperVariableReadsWhatTheCacheDrops: a rule is given the
// AppWrapper read from the API server when it reads what the cache does not
// keep as it is (annotations, finalizers, managedFields, spec, status), and
// the cached one when it reads only what the cache keeps whole.
func TestAppWrapperVariableReadsWhatTheCacheDrops(t *testing.T) {
	live := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "u",
		Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"team.example.com/run": "r42"},
		Finalizers: []string{"example.com/hold"}}}
	slim, err := slimAppWrapper(live.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached := slim.(*awv1beta2.AppWrapper)
	for expr, wantLive := range map[string]bool{
		"appWrapper.metadata.labels['team'] == 'a'":                                      false,
		"appWrapper.metadata.name == 'run' && appWrapper.metadata.namespace == 'ns'":     false,
		"appWrapper.metadata.annotations['team.example.com/run'] == 'r42'":               true,
		"appWrapper.metadata.?finalizers.orValue([]).exists(f, f == 'example.com/hold')": true,
		"has(appWrapper.metadata.managedFields)":                                         true,
		"appWrapper.metadata.size() > 0":                                                 true,
		"appWrapper.spec.components.size() == 0":                                         true,
		"appWrapper.status.phase == ''":                                                  true,
		"object.status.succeeded > 0":                                                    false,
	} {
		p, err := celpolicies.Compile(&wrapupv1alpha1.CompletionRuleSpec{Success: expr})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		r := &countingReader{live: live}
		if _, err := view.FullAppWrapperVariable(context.Background(), r, cached, p); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := r.gets > 0; got != wantLive {
			t.Errorf("%s: read from the API server = %v, want %v", expr, got, wantLive)
		}
	}
}
