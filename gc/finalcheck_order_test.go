package gc

import (
	"context"
	"sync/atomic"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// A final check that reads the AppWrapper lists the rules only once the
// AppWrapper is answered: the rules are then at least as new as the
// AppWrapper decided on, so a rule edit made before a change of the
// AppWrapper (dryRun set, then an ignore annotation removed) is seen with
// that change, and the AppWrapper's later changes fail the preconditions
// of the writes. Sending the LIST first, for the AppWrapper to be read
// while it waits, fails this test.
func TestFinalCheckListsTheRulesAfterItReadsTheAppWrapper(t *testing.T) {
	ctx := context.Background()
	fc := historyBed(t)
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"}}
	if err := fc.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	var read, listed atomic.Bool
	reader := interceptor.NewClient(fc, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*awv1beta2.AppWrapper); ok {
				read.Store(true)
			}
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*wrapupv1alpha1.CompletionRuleList); ok {
				listed.Store(true)
				if !read.Load() {
					t.Error("the rules were listed before the AppWrapper was read")
				}
			}
			return c.List(ctx, list, opts...)
		},
	})
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: reader, Recorder: events.NewFakeRecorder(8), Counters: nopCounter{},
		Policies: &celpolicies.Cache{}, Triggers: mkNoTriggers{}, Assign: newAssignments()}
	r.defaults()
	var mem awMemory
	in, _, err := r.decideFresh(ctx, types.NamespacedName{Namespace: "ns", Name: "run"}, nil, &mem)
	if err != nil {
		t.Fatal(err)
	}
	if in.AppWrapper == nil || in.AppWrapper.UID != "aw-uid" || !listed.Load() {
		t.Fatalf("the final check read %v, listed the rules: %v", in.AppWrapper, listed.Load())
	}
}
