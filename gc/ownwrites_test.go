package gc

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestOwnWritesDropOnlyTheirEchoes: the watch events of an AppWrapper
// wrapup deletes (or deleted) need no decision, and are dropped; any other
// event passes, and so does every event of another AppWrapper under the
// same name. wrapup's mirror patches are not remembered: their events
// pass, and a decision on them changes nothing (no decision reads the
// mirror).
func TestOwnWritesDropOnlyTheirEchoes(t *testing.T) {
	key := types.NamespacedName{Namespace: "team-a", Name: "run-1"}
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(uid, rv string) *awv1beta2.AppWrapper {
		aw := util.MakeAppWrapper(key.Name, key.Namespace).UID(types.UID(uid)).Obj()
		aw.ResourceVersion = rv
		return aw
	}
	// mirrored is the AppWrapper at rv with the mirror of an outcome.
	mirrored := func(uid, rv string) *awv1beta2.AppWrapper {
		aw := util.MakeAppWrapper(key.Name, key.Namespace).UID(types.UID(uid)).Recorded(wrapupv1alpha1.OutcomeSucceeded, finished, "").Obj()
		aw.ResourceVersion = rv
		return aw
	}
	deleting := func(uid, rv string) *awv1beta2.AppWrapper {
		aw := at(uid, rv)
		aw.DeletionTimestamp = ptr.To(metav1.NewTime(finished))
		return aw
	}

	t.Run("nothing written: every event passes", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		g.Expect(o.echo(nil, at("a", "1"))).To(BeFalse())
		g.Expect(o.echo(at("a", "1"), at("a", "2"))).To(BeFalse())
		g.Expect(o.echo(at("a", "2"), nil)).To(BeFalse())
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("the mirror's event passes: wrapup remembers no patch", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		g.Expect(o.echo(at("a", "6"), mirrored("a", "7"))).To(BeFalse())
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("every event of an AppWrapper wrapup deleted is dropped, to its deletion's", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		o.deleted(key, "a")
		g.Expect(o.isDeleted(key, "a")).To(BeTrue())
		g.Expect(o.echo(at("a", "6"), mirrored("a", "7"))).To(BeTrue())
		g.Expect(o.echo(mirrored("a", "7"), deleting("a", "8"))).To(BeTrue()) // its deletionTimestamp
		g.Expect(o.echo(deleting("a", "8"), deleting("a", "9"))).To(BeTrue()) // its finalizer removed
		g.Expect(o.echo(deleting("a", "9"), nil)).To(BeTrue())
		g.Expect(o.m).To(BeEmpty())
		g.Expect(o.isDeleted(key, "a")).To(BeFalse())
	})

	t.Run("the events of a delete before its answer are dropped", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		g.Expect(o.isDeleted(key, "a")).To(BeFalse())
		g.Expect(o.echo(mirrored("a", "7"), deleting("a", "8"))).To(BeTrue())
		g.Expect(o.echo(deleting("a", "8"), nil)).To(BeTrue())
		o.deleted(key, "a")
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("while the delete is unanswered, a change that is no deletion passes", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		g.Expect(o.echo(at("a", "7"), at("a", "8"))).To(BeFalse())
		// The delete then conflicts, and is forgotten.
		o.gone(key)
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("another AppWrapper under the same name is not wrapup's to drop", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		o.deleted(key, "a")
		g.Expect(o.isDeleted(key, "b")).To(BeFalse())
		g.Expect(o.echo(nil, at("b", "12"))).To(BeFalse())
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("a delete answered after another AppWrapper took the name remembers nothing", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		g.Expect(o.echo(at("a", "7"), nil)).To(BeTrue())
		g.Expect(o.echo(nil, at("b", "9"))).To(BeFalse())
		o.deleted(key, "a")
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("the cache no longer holding it ends what is remembered", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleting(key, "a")
		o.deleted(key, "a")
		o.gone(key)
		g.Expect(o.m).To(BeEmpty())
	})
}

// TestTriggerWanted: a trigger's event brings a reconcile only for an
// AppWrapper the cache holds and wrapup did not delete.
func TestTriggerWanted(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "run"}
	held := map[types.NamespacedName]types.UID{}
	r := &appWrapperReconciler{stored: func(k types.NamespacedName) (types.UID, bool) { uid, ok := held[k]; return uid, ok }}
	ev := triggers.AppWrapperEvent(key).Object
	if r.triggerWanted(ev) {
		t.Error("an event for an AppWrapper the cache does not hold brings a reconcile")
	}
	held[key] = "uid-1"
	if !r.triggerWanted(ev) {
		t.Error("an event for an AppWrapper in the cache brings no reconcile")
	}
	r.own.deleting(key, "uid-1")
	r.own.deleted(key, "uid-1")
	if r.triggerWanted(ev) {
		t.Error("an event for an AppWrapper wrapup deleted brings a reconcile")
	}
	held[key] = "uid-2"
	if !r.triggerWanted(ev) {
		t.Error("an event for the AppWrapper created again under the name brings no reconcile")
	}
	if !(&appWrapperReconciler{}).triggerWanted(ev) {
		t.Error("with no look into the cache, an event is dropped")
	}
}
