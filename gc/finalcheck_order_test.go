package gc

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// The final check sends its read of the rules (a consistent LIST, which
// waits for the API server's watch cache) as it starts: the AppWrapper is
// read while that read is on its way, not before it is sent.
func TestFinalCheckListsTheRulesWhileItReadsTheAppWrapper(t *testing.T) {
	ctx := context.Background()
	fc := historyBed(t)
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"}}
	if err := fc.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	listed, release := make(chan struct{}), make(chan struct{})
	reader := interceptor.NewClient(fc, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*wrapupv1alpha1.CompletionRuleList); ok {
				close(listed)
				<-release
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*awv1beta2.AppWrapper); ok {
				// The rules' read was sent before this one, and is not
				// answered yet.
				select {
				case <-listed:
				case <-time.After(time.Minute):
					t.Error("the AppWrapper was read before the rules' LIST was sent")
				}
				close(release)
			}
			return c.Get(ctx, key, obj, opts...)
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
	if in.AppWrapper == nil || in.AppWrapper.UID != "aw-uid" {
		t.Fatalf("the final check read %v", in.AppWrapper)
	}
}
