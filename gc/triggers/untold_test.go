package triggers

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// A noting watch stopped with an event that nobody took ends its loop
// (closes its channel) without handing the event on, and has noted it:
// the informer that stopped reading it is gone, and the delete is told by
// the one that replaces it.
func TestNotingWatchStoppedWithAnEventNotTaken(t *testing.T) {
	g := gomega.NewWithT(t)
	in := watch.NewFake()
	u := newUntold()
	n := newNotingWatch(in, u)
	job := &unstructured.Unstructured{}
	job.SetNamespace("ns")
	job.SetName("run-bench")
	job.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "run"})
	in.Delete(job) // returns once the loop has taken it
	n.Stop()
	g.Eventually(func() bool {
		select {
		case e, ok := <-n.ResultChan():
			g.Expect(ok).To(gomega.BeFalse(), "handed on after the stop: %v", e)
			return true
		default:
			return false
		}
	}, 5*time.Second, time.Millisecond).Should(gomega.BeTrue())
	g.Expect(u.owners()).To(gomega.ConsistOf(types.NamespacedName{Namespace: "ns", Name: "run"}))
}

// Deletes are told oldest first, one at a time, per trigger.
func TestUntoldTellsTheOldestDeleteOfATrigger(t *testing.T) {
	g := gomega.NewWithT(t)
	u := newUntold()
	for _, owner := range []string{"first", "second"} {
		job := &unstructured.Unstructured{}
		job.SetNamespace("ns")
		job.SetName("bench")
		job.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: owner})
		u.watched(watch.Event{Type: watch.Deleted, Object: job})
		u.watched(watch.Event{Type: watch.Modified, Object: job})
	}
	t1 := &cachedTrigger{namespace: "ns", name: "bench", owner: "first"}
	u.told(t1)
	g.Expect(u.owners()).To(gomega.ConsistOf(types.NamespacedName{Namespace: "ns", Name: "second"}))
	u.told(t1)
	g.Expect(u.owners()).To(gomega.BeEmpty())
	u.told(t1) // a relist's delete, not from the watch
	g.Expect(u.owners()).To(gomega.BeEmpty())
}
