package gc

import (
	"context"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/read"
)

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
		if _, err := read.FullAppWrapperVariable(context.Background(), r, cached, p); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := r.gets > 0; got != wantLive {
			t.Errorf("%s: read from the API server = %v, want %v", expr, got, wantLive)
		}
	}
}
