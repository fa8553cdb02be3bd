package triggers

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/test/util"
)

// jobRunning is a running benchmark trigger Job as the API server
// returned it.
func jobRunning(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/job-running.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkCachedTrigger reports the heap a trigger informer keeps per Job
// (B/trigger): whole as decoded, and as wrapup's transform keeps it for the
// built-in Job expressions (status) and for a rule that reads metadata too.
func BenchmarkCachedTrigger(b *testing.B) {
	data := jobRunning(b)
	decode := func() *unstructured.Unstructured {
		obj, err := apiruntime.Decode(unstructured.UnstructuredJSONScheme, data)
		if err != nil {
			b.Fatal(err)
		}
		return obj.(*unstructured.Unstructured)
	}
	p, err := celpolicies.Compile(&wrapupv1alpha1.CompletionRuleSpec{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform toolscache.TransformFunc
	}{
		{"decoded", func(o any) (any, error) { return o, nil }},
		{"builtin-job", keepFields(p.ObjectFields(schema.GroupKind{Group: "batch", Kind: "Job"}))},
		{"metadata-and-status", keepFields(celpolicies.FieldsOf("metadata", "status"))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = util.RetainedPerObject(1000, func(i int) any {
					u := decode()
					u.SetName(fmt.Sprintf("run-%d", i))
					out, err := tc.transform(u)
					if err != nil {
						b.Fatal(err)
					}
					return out
				})
			}
			b.ReportMetric(per, "B/trigger")
		})
	}
}

// BenchmarkCachedTriggerRead is the cost of reading a cached trigger for an
// evaluation: decoding what the informer keeps of a running Job.
func BenchmarkCachedTriggerRead(b *testing.B) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(jobRunning(b)); err != nil {
		b.Fatal(err)
	}
	p, err := celpolicies.Compile(&wrapupv1alpha1.CompletionRuleSpec{})
	if err != nil {
		b.Fatal(err)
	}
	out, err := keepFields(p.ObjectFields(schema.GroupKind{Group: "batch", Kind: "Job"}))(u)
	if err != nil {
		b.Fatal(err)
	}
	t := out.(*cachedTrigger)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.object(); err != nil {
			b.Fatal(err)
		}
	}
}
