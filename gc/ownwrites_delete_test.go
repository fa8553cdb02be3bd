package gc

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// releaseTriggers records the claims released.
type releaseTriggers struct {
	mapTriggers
	released []types.NamespacedName
}

func (t *releaseTriggers) Keep(key types.NamespacedName, kinds []schema.GroupKind) {
	if kinds == nil {
		t.released = append(t.released, key)
	}
}

// TestDeleteAnsweredNotFoundForgets: wrapup's delete is under way when
// someone else's deletion (kubectl delete, a namespace deletion, the
// garbage collector) finishes first. Both deletion events reach the watch
// during the DELETE's round trip and are dropped (deleting, vanished), the
// trigger's later events are dropped too (the store no longer holds the
// AppWrapper), and the DELETE answers 404: the reconcile forgets the
// AppWrapper itself (its memory, its trigger claims, its rule assignment),
// as no other reconcile will.
func TestDeleteAnsweredNotFoundForgets(t *testing.T) {
	ctx := context.Background()
	fc := historyBed(t)
	key := types.NamespacedName{Namespace: "ns", Name: "run"}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: "aw-uid"}}
	if err := fc.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	cur := &awv1beta2.AppWrapper{}
	if err := fc.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	var r *appWrapperReconciler
	var passed []string
	w := interceptor.NewClient(fc, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			// Someone else's delete lands first, and the AppWrapper is gone
			// (no finalizer left) before wrapup's DELETE reaches the server.
			gone := cur.DeepCopy()
			if err := c.Delete(ctx, gone); err != nil {
				t.Fatal(err)
			}
			// Its watch events reach the controller during the round trip.
			dt := cur.DeepCopy()
			dt.DeletionTimestamp = &metav1.Time{}
			p := ownEcho(&r.own)
			if p.Update(event.UpdateEvent{ObjectOld: cur, ObjectNew: dt}) {
				passed = append(passed, "deletionTimestamp")
			}
			if p.Delete(event.DeleteEvent{Object: dt}) {
				passed = append(passed, "delete")
			}
			// wrapup's DELETE: 404.
			return c.Delete(ctx, obj, opts...)
		},
	})
	trig := &releaseTriggers{mapTriggers: mapTriggers{}}
	r = &appWrapperReconciler{Cache: fc, Writer: w, APIReader: fc, Recorder: events.NewFakeRecorder(64), Counters: nopCounter{},
		Triggers: trig, Assign: newAssignments()}
	// What an earlier reconcile remembered for it.
	r.Assign.Set(key, "jobs")
	mem := r.memory.take(key)
	mem.uid = "aw-uid"
	mem.holdStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	res, err := r.delete(ctx, decision.Input{AppWrapper: cur}, decision.Decision{}, mem)
	r.memory.settle(key, mem)
	if len(passed) != 0 || res.Requeue || res.RequeueAfter != 0 || err != nil {
		t.Fatalf("delete: %+v, %v; events passed: %v; want no requeue and both events dropped", res, err, passed)
	}
	// The trigger's later events (the garbage collector deleting the Job)
	// are dropped too: the store no longer holds the AppWrapper.
	r.stored = func(types.NamespacedName) (types.UID, bool) { return "", false }
	if r.triggerWanted(triggers.AppWrapperEvent(key).Object) {
		t.Fatal("a trigger event of an AppWrapper the store does not hold brings a reconcile")
	}
	if r.memory.Len() != 0 || r.Assign.Rule(key) != "" || len(trig.released) == 0 {
		t.Errorf("leaked with no reconcile to come: memory entries %d, assigned to %q (matchedAppWrappers %d), claims released %v",
			r.memory.Len(), r.Assign.Rule(key), r.Assign.Count("jobs"), trig.released)
	}
}
