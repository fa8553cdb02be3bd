package gc

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/test/util"
)

func TestOwnWritesDropOnlyTheirEchoes(t *testing.T) {
	key := types.NamespacedName{Namespace: "team-a", Name: "run-1"}
	at := func(uid, rv string) client.Object {
		aw := util.MakeAppWrapper(key.Name, key.Namespace).UID(types.UID(uid)).Obj()
		aw.ResourceVersion = rv
		return aw
	}

	t.Run("nothing written: every event passes", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		g.Expect(o.echo(nil, at("a", "1"))).To(BeFalse())
		g.Expect(o.echo(at("a", "1"), at("a", "2"))).To(BeFalse())
		g.Expect(o.echo(at("a", "2"), nil)).To(BeFalse())
	})

	t.Run("the record patch's echo is dropped, once", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.patched(key, "a", "7")
		g.Expect(o.echo(at("a", "6"), at("a", "7"))).To(BeTrue())
		// The next change is someone else's.
		g.Expect(o.echo(at("a", "7"), at("a", "8"))).To(BeFalse())
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("a change before the echo passes, and ends the wait for it", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.patched(key, "a", "7")
		g.Expect(o.echo(at("a", "5"), at("a", "6"))).To(BeFalse())
		g.Expect(o.echo(at("a", "6"), at("a", "7"))).To(BeFalse())
	})

	t.Run("every event of an AppWrapper wrapup deleted is dropped, to its deletion's", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.patched(key, "a", "7")
		o.deleted(key, "a")
		g.Expect(o.isDeleted(key, "a")).To(BeTrue())
		g.Expect(o.echo(at("a", "6"), at("a", "7"))).To(BeTrue())
		g.Expect(o.echo(at("a", "7"), at("a", "8"))).To(BeTrue()) // its deletionTimestamp
		g.Expect(o.echo(at("a", "8"), at("a", "9"))).To(BeTrue()) // its finalizer removed
		g.Expect(o.echo(at("a", "9"), nil)).To(BeTrue())
		g.Expect(o.m).To(BeEmpty())
		g.Expect(o.isDeleted(key, "a")).To(BeFalse())
	})

	t.Run("another AppWrapper under the same name is not wrapup's to drop", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
		o.deleted(key, "a")
		g.Expect(o.isDeleted(key, "b")).To(BeFalse())
		g.Expect(o.echo(nil, at("b", "12"))).To(BeFalse())
		g.Expect(o.m).To(BeEmpty())

		o.patched(key, "a", "7")
		g.Expect(o.echo(at("a", "7"), nil)).To(BeFalse()) // deleted by someone else: decide
		g.Expect(o.m).To(BeEmpty())
	})

	t.Run("the cache no longer holding it ends what is remembered", func(t *testing.T) {
		g := NewWithT(t)
		var o ownWrites
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
