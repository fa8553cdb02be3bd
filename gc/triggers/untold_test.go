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

// A told delete is forgotten by its object's UID; without UIDs, the
// oldest of the trigger's name, unless it is a relist's (a tombstone),
// which came from no watch.
func TestUntoldForgetsTheToldDelete(t *testing.T) {
	g := gomega.NewWithT(t)
	deleted := func(u *untold, uid types.UID, owner string) {
		job := &unstructured.Unstructured{}
		job.SetNamespace("ns")
		job.SetName("bench")
		job.SetUID(uid)
		job.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: owner})
		u.watched(watch.Event{Type: watch.Modified, Object: job})
		u.watched(watch.Event{Type: watch.Deleted, Object: job})
	}
	trigger := func(uid types.UID, owner string) *cachedTrigger {
		tr := &cachedTrigger{namespace: "ns", name: "bench", owner: owner}
		tr.setUIDs(uid, "")
		return tr
	}
	second := types.NamespacedName{Namespace: "ns", Name: "second"}

	u := newUntold()
	deleted(u, "7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21", "first")
	deleted(u, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "second")
	// A tombstone of an older object of the name: not a watched delete.
	u.told(trigger("11111111-2222-4333-8444-555555555555", "zero"), true)
	g.Expect(u.owners()).To(gomega.HaveLen(2))
	u.told(trigger("7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21", "first"), true)
	g.Expect(u.owners()).To(gomega.ConsistOf(second))
	u.told(trigger("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "second"), false)
	g.Expect(u.owners()).To(gomega.BeEmpty())

	// A delete a watch started again brought twice: told once.
	u = newUntold()
	deleted(u, "7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21", "first")
	deleted(u, "7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21", "first")
	u.told(trigger("7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21", "first"), false)
	g.Expect(u.owners()).To(gomega.BeEmpty())

	u = newUntold()
	deleted(u, "", "first")
	deleted(u, "", "second")
	u.told(trigger("", "first"), true)
	g.Expect(u.owners()).To(gomega.HaveLen(2), "a tombstone without a UID")
	u.told(trigger("", "first"), false)
	g.Expect(u.owners()).To(gomega.ConsistOf(second))
	u.told(trigger("", "second"), false)
	g.Expect(u.owners()).To(gomega.BeEmpty())
	u.told(trigger("", "second"), false)
	g.Expect(u.owners()).To(gomega.BeEmpty())
}
